// An agent's habits through `txbox mcp`, with the official SDK's client:
// one MCP session (stdio: the connection; HTTP: the Mcp-Session-Id) is one
// txbox session, so what one `run` leaves for the next carries over:
//
//   node tests/mcp/session.mjs TXBOX WORKSPACE stdio|http
//
// a helper script written to /tmp by one call runs in the next; a server
// started in the background by one is reached with curl by the next; what
// a background process writes later is a transaction of its own, reported
// in the next answer's first line; a write to /tmp persists for the
// session (not reported as discarded), while one in a multi-command
// transaction (no session) is reported as discarded; over HTTP two MCP
// sessions do not share their /tmp; when the MCP session ends, what it
// left running is killed. WORKSPACE holds README ("hello").
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import { check, finish } from './tap.mjs';
import { httpTransport, sanitizerReports, startServer } from './httpserver.mjs';

const [txbox, ws, mode] = process.argv.slice(2);
if (!txbox || !ws || !['stdio', 'http'].includes(mode)) {
    console.error('usage: session.mjs TXBOX WORKSPACE stdio|http');
    process.exit(2);
}
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const mark = `m${process.pid}x${Date.now() % 100000}`;
// a process to find with ps: its arguments are this run's own
const nap = 3000000 + (process.pid % 1000000);
const napping = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n')
    .some((l) => l.trim() === `sleep ${nap}`);

let server = null, stderr = '';
async function open() {
    let transport;
    if (mode === 'http') {
        transport = httpTransport(server);
    } else {
        transport = new StdioClientTransport({ command: txbox, args: ['mcp', '-C', ws], stderr: 'pipe' });
        transport.stderr?.on('data', (d) => { stderr += d; });
    }
    const client = new Client({ name: 'txbox-session-test', version: '1.0.0' }, { capabilities: {} });
    await client.connect(transport);
    return { client, transport };
}

// The answer as the model reads it: the first line and the JSON after it.
async function run(c, command, extra = {}) {
    const r = await c.client.callTool({ name: 'run', arguments: { command, ...extra } }, undefined,
                                      { timeout: 300000 });
    const text = r?.content?.[0]?.text ?? '';
    const nl = text.indexOf('\n');
    let obj = {};
    try { obj = JSON.parse(text.slice(nl + 1)); } catch { /* checked by the caller */ }
    return { line: nl < 0 ? text : text.slice(0, nl), obj, text, isError: r.isError };
}

if (mode === 'http')
    server = await startServer(txbox, ['-C', ws]);
try {
    const a = await open();

    // a helper script in /tmp, run by the next call
    let r = await run(a, `printf 'print(6*7)\\n' >/tmp/helper-${mark}.py`);
    check('a helper written to /tmp: committed', r.obj.outcome === 'committed', r.text);
    check('a helper written to /tmp is not called discarded: it persists for the session',
          !/discarded/.test(r.line), r.line);
    r = await run(a, `python3 /tmp/helper-${mark}.py`);
    check('the next call runs the helper from /tmp', r.obj.exit_code === 0 && r.obj.stdout === '42\n', r.text);

    // a server in the background, reached from the next call
    r = await run(a, 'python3 -m http.server 18080 --bind 127.0.0.1 >/dev/null 2>&1 &');
    check('a server started in the background: the call answers', r.obj.exit_code === 0, r.text);
    r = await run(a, 'for i in $(seq 100); do curl -sf http://127.0.0.1:18080/README && exit 0; sleep 0.1; done; exit 7');
    check('the next call reaches it with curl', r.obj.exit_code === 0 && r.obj.stdout === 'hello\n', r.text);

    // what a background process writes later: its own transaction, said
    // in the next answer's first line
    r = await run(a, `(sleep 1; echo late >late-${mark}.txt) >/dev/null 2>&1 &`);
    check('a background writer started', r.obj.exit_code === 0, r.text);
    const from = r.obj.tx;
    await sleep(3000);
    r = await run(a, 'true');
    check('the next answer\'s first line reports the late transaction, committed',
          new RegExp(`background processes of tx ${from} .*committed.*added late-${mark}\\.txt`).test(r.line), r.line);
    check('its JSON lists it', Array.isArray(r.obj.late_transactions) &&
          r.obj.late_transactions[0]?.from_tx === from, r.text);
    r = await run(a, `cat late-${mark}.txt`);
    check('the late write is in the workspace', r.obj.stdout === 'late\n', r.text);

    // in a multi-command transaction (no session): a /tmp write is
    // discarded, and the first line says so
    const b = await a.client.callTool({ name: 'begin', arguments: {} });
    const mtx = JSON.parse(b.content[0].text.split('\n').pop()).transaction;
    r = await run(a, `mkdir -p /tmp/out-${mark} && echo out >/tmp/out-${mark}/outside.txt`, { tx: mtx });
    check('in a transaction a write outside the workspace is reported as discarded in the first line',
          r.line.includes(`discarded 1 file written outside the workspace (it does not persist): /tmp/out-${mark}/outside.txt`),
          r.line);
    await a.client.callTool({ name: 'abort', arguments: { tx: mtx } });

    // a process left running, for the end
    r = await run(a, `sleep ${nap} &`);
    check('a process left running in the background', r.obj.exit_code === 0 && napping(), r.text);

    if (mode === 'http') {
        // another MCP session is another txbox session: its /tmp is not a's
        const other = await open();
        r = await run(other, `cat /tmp/helper-${mark}.py`);
        check('another MCP session does not see the first one\'s /tmp', r.obj.exit_code !== 0, r.text);
        await other.transport.terminateSession();
        await other.client.close();
        // the end of the MCP session (DELETE) ends its txbox session
        await a.transport.terminateSession();
        await a.client.close();
    } else {
        await a.client.close(); // stdin closed: the server ends
    }
    let gone = false;
    for (let i = 0; i < 100 && !gone; i++) {
        gone = !napping();
        if (!gone) await sleep(100);
    }
    check('when the MCP session ends, what it left running is killed', gone);
    const list = JSON.parse(execFileSync(txbox, ['session', 'list', '--json', '-C', ws], { encoding: 'utf8' }));
    check('no txbox session is left running', !list.sessions.some((s) => s.running), list);
} catch (e) {
    check(`no exception: ${e?.stack ?? e}`, false, stderr);
} finally {
    if (server) {
        const st = await server.stop();
        check('the server exits 0 on SIGTERM', st.code === 0, st);
        stderr = server.stderr();
    }
    check('no sanitizer reports', !/AddressSanitizer|LeakSanitizer|runtime error:/.test(stderr) &&
          !sanitizerReports().length, stderr);
}
finish();
