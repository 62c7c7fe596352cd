// Load on `txbox mcp --listen`: N concurrent clients (the official SDK's
// HTTP client) on one workspace, each running its own transactions (single
// runs, and one multi-command transaction committed as a whole). Then:
// nothing lost (every commit a client was told of is in the audit log once
// and its files are in the workspace whole, nothing else is), the server's
// memory bounded, and no descriptor, thread or process left behind.
//
//   node tests/mcp/load.mjs TXBOX WORKSPACE [CLIENTS [RUNS]]
//
// Prints "ok N - ..." lines, a "# load: ..." line with the figures, and a
// summary; exits 1 if anything failed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { check, finish } from './tap.mjs';
import { httpTransport, startServer } from './httpserver.mjs';

const worker = process.argv[2] === '--worker';
const [txbox, ws, nClients = '50', nRuns = '3', ...serverArgs] = process.argv.slice(worker ? 3 : 2);
const CLIENTS = Number(nClients), RUNS = Number(nRuns);
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const long = { timeout: 900000, resetTimeoutOnProgress: true };

function proc(pid) {
    const st = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(st)?.[1] ?? 0);
    return {
        rss: kib('VmRSS'), hwm: kib('VmHWM'), threads: kib('Threads'),
        fds: readdirSync(`/proc/${pid}/fd`).length,
        fdlist: readdirSync(`/proc/${pid}/fd`).map((f) => { try { return readlinkSync(`/proc/${pid}/fd/${f}`); } catch { return '?'; } }),
    };
}

function children(pid) {
    let out = '';
    try {
        out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' }).trim();
    } catch { /* none: ps exits 1 */ }
    return out ? out.split('\n') : [];
}

// every file of the workspace outside .txbox, with its content
function files(dir, prefix = '') {
    const out = {};
    for (const e of readdirSync(join(dir, prefix), { withFileTypes: true })) {
        const rel = join(prefix, e.name);
        if (rel === '.txbox') continue;
        if (e.isDirectory()) Object.assign(out, files(dir, rel));
        else out[rel] = readFileSync(join(dir, rel), 'utf8');
    }
    return out;
}

const text = (r) => r?.content?.[0]?.text ?? '';

async function oneClient(server, k, told) {
    const client = new Client({ name: `load-${k}`, version: '1.0.0' });
    const transport = httpTransport(server);
    await client.connect(transport);
    const expect = {};
    for (let i = 0; i < RUNS; i++) {
        const r = await client.callTool({ name: 'run', arguments: { command: `mkdir -p c${k} && printf '%s\\n' c${k}-r${i} > c${k}/r${i}.txt` } },
                                        undefined, long);
        const m = /^committed tx (\d+)/.exec(text(r));
        if (!m) throw new Error(`client ${k} run ${i}: ${text(r)}`);
        told.push(m[1]);
        expect[`c${k}/r${i}.txt`] = `c${k}-r${i}\n`;
    }
    let r = await client.callTool({ name: 'begin', arguments: { name: `c${k}` } }, undefined, long);
    const tx = /transaction (\d+)/.exec(text(r))?.[1];
    for (const part of ['a', 'b']) {
        r = await client.callTool({ name: 'run', arguments: { command: `mkdir -p c${k} && echo ${part} > c${k}/m${part}.txt`, tx } },
                                  undefined, long);
        if (!/^staged/.test(text(r))) throw new Error(`client ${k} staged run ${part}: ${text(r)}`);
    }
    r = await client.callTool({ name: 'commit', arguments: { tx } }, undefined, long);
    const m = /^committed transaction (\d+)/.exec(text(r)) ?? /"tx":"(\d+)"/.exec(text(r));
    if (!/^committed/.test(text(r))) throw new Error(`client ${k} commit: ${text(r)}`);
    told.push(tx);
    expect[`c${k}/ma.txt`] = 'a\n';
    expect[`c${k}/mb.txt`] = 'b\n';
    await transport.terminateSession();
    await client.close();
    return { expect, committedTx: m?.[1] };
}

// The clients run in a process of their own (--worker URL TOKEN): when it
// exits, their connections close, and the server's descriptors can be
// counted without the idle keep-alive connections of a live client.
if (worker) {
    const [url, token] = serverArgs;
    const server = { url: () => new URL(url), token };
    const told = [];
    const results = await Promise.allSettled(Array.from({ length: CLIENTS }, (_, k) => oneClient(server, k, told)));
    const expect = {};
    for (const r of results) if (r.status === 'fulfilled') Object.assign(expect, r.value.expect);
    process.stdout.write(JSON.stringify({ told, expect,
                                          failures: results.filter((r) => r.status === 'rejected').map((r) => `${r.reason}`) }));
    process.exit(0);
}

function runWorker(server) {
    return new Promise((res, rej) => {
        const p = spawn(process.execPath, [new URL(import.meta.url).pathname, '--worker', txbox, ws, nClients, nRuns,
                                           server.url().href, server.token], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        p.stdout.on('data', (d) => { out += d; });
        p.on('exit', (code) => (code === 0 ? res(JSON.parse(out)) : rej(new Error(`worker exited ${code}: ${out}`))));
    });
}

const initial = files(ws); // what the workspace held before: kept as it was
const server = await startServer(txbox, ['-C', ws, ...serverArgs]);
const pid = server.proc.pid;
try {
    // warm up: one session, one run (the resident thread, the policy)
    {
        const c = new Client({ name: 'warm', version: '1' });
        const t = httpTransport(server);
        await c.connect(t);
        await c.callTool({ name: 'run', arguments: { command: 'echo warm > warm.txt' } });
        await t.terminateSession();
        await c.close();
    }
    await sleep(300);
    const base = proc(pid);
    let peak = base.rss;
    let sampling = true;
    const sampler = (async () => {
        while (sampling && server.proc.exitCode === null && server.proc.signalCode === null) {
            try { peak = Math.max(peak, proc(pid).rss); } catch { /* it exited: seen below */ }
            await sleep(100);
        }
    })();
    const t0 = Date.now();
    const w = await runWorker(server);
    const secs = (Date.now() - t0) / 1000;
    sampling = false;
    await sampler;
    const { told, failures } = w;
    check(`${CLIENTS} clients each ran ${RUNS} transactions and one of three commands, all committed`,
          failures.length === 0, failures.slice(0, 5));
    const expect = { ...initial, 'warm.txt': 'warm\n', ...w.expect };

    // nothing lost, nothing torn, nothing twice
    const log = JSON.parse(execFileSync(txbox, ['log', '--json', '-C', ws], { encoding: 'utf8', maxBuffer: 1 << 28 }));
    const ids = log.map((t) => t.tx);
    check('no transaction id twice in the audit log', new Set(ids).size === ids.length);
    const committed = new Set(log.filter((t) => t.outcome === 'committed').map((t) => t.tx));
    const missing = told.filter((tx) => !committed.has(tx));
    check(`every commit a client was told of (${told.length}) is in the log as committed`, missing.length === 0 &&
          told.length === CLIENTS * (RUNS + 1), { missing: missing.slice(0, 10), told: told.length });
    check('no client was told the same transaction twice', new Set(told).size === told.length);
    const have = files(ws);
    const wrong = Object.keys({ ...expect, ...have }).filter((f) => have[f] !== expect[f]);
    check(`the workspace holds exactly the ${Object.keys(expect).length} files committed, each whole`,
          wrong.length === 0, wrong.slice(0, 10).map((f) => [f, have[f], expect[f]]));
    const open = JSON.parse(execFileSync(txbox, ['status', '--json', '-C', ws], { encoding: 'utf8' })).transactions;
    check('no transaction left open', open.length === 0, open);

    // bounded memory, nothing left behind
    await sleep(500);
    const after = proc(pid);
    const kids = children(pid);
    console.log(`# load: ${CLIENTS} clients, ${told.length} transactions (${CLIENTS * (RUNS + 2)} runs) in ${secs.toFixed(1)} s;` +
                ` RSS ${base.rss} KiB after warm-up, peak ${peak} KiB, ${after.rss} KiB after;` +
                ` ${base.fds} -> ${after.fds} descriptors, ${base.threads} -> ${after.threads} threads`);
    check('memory bounded: the peak RSS under load stays under 1 GiB', peak < (1 << 20), peak);
    check('descriptors after the load: as before it', after.fds <= base.fds,
          { before: base.fdlist, after: after.fdlist });
    check('threads after the load: as before it', after.threads <= base.threads, after.threads);
    check('no child process left', kids.length === 0, kids);
} catch (e) {
    check('no unexpected exception', false, `${e?.stack ?? e}\n${server.stderr().slice(-3000)}`);
}
const { code } = await server.stop();
check('the server stops with status 0', code === 0, code);
check('no crash report', !/AddressSanitizer|runtime error|LeakSanitizer/.test(server.stderr()), server.stderr().slice(-3000));
const lines = server.access();
check('one access-log line per request', lines.length >= CLIENTS * (RUNS + 6), lines.length);
finish();
