// Starting `txbox mcp --listen` for a test: on 127.0.0.1, a free port
// (the server says which on its first access-log line), a fresh random
// token in a file of its own, and the official SDK's HTTP client
// transport pointed at it.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// Servers still running: stopped when the test process exits, however it
// exits, so that no test leaves one behind.
const live = new Map(); // process -> its directory
process.on('exit', () => {
    for (const [p, dir] of live) {
        p.kill('SIGTERM');
        rmSync(dir, { recursive: true, force: true });
    }
});

// Every server's stderr, for a last look for sanitizer reports.
const stderrs = [];
export function sanitizerReports() {
    return stderrs.map((f) => f()).filter((e) => /AddressSanitizer|LeakSanitizer|runtime error:/.test(e));
}

export function newToken() {
    return randomBytes(24).toString('base64url');
}

// Starts the server with args (after `mcp --listen 127.0.0.1:0
// --token-file F`); resolves once it listens. opts.token: the token
// (default: a new one); opts.tokenFile: a file that holds it already;
// opts.scheme: 'https' with --tls-cert/--tls-key in args; opts.env.
export async function startServer(txbox, args, opts = {}) {
    const dir = mkdtempSync(join(tmpdir(), 'txbox-http-'));
    const token = opts.token ?? newToken();
    const tokenFile = opts.tokenFile ?? join(dir, 'token');
    if (!opts.tokenFile) writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const proc = spawn(txbox, ['mcp', '--listen', opts.listen ?? '127.0.0.1:0', '--token-file', tokenFile, ...args],
                       { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    let out = '', err = '';
    live.set(proc, dir);
    // the exit, once stdout is read to its end too (the access log's last
    // lines may still be in the pipe at 'exit'); 5 s at most, should a
    // process the server left hold its stdout
    const drained = new Promise((res) => { proc.stdout.on('end', res); proc.stdout.on('error', res); });
    const exited = new Promise((res) => proc.on('exit', (code, sig) => {
        live.delete(proc);
        Promise.race([drained, new Promise((r) => setTimeout(r, 5000).unref())]).then(() => res({ code, sig }));
    }));
    proc.stderr.on('data', (d) => { err += d; });
    stderrs.push(() => err);
    const listening = await new Promise((res, rej) => {
        let seen = false;
        const timer = setTimeout(() => rej(new Error(`no listening line in 60 s; stderr: ${err}`)), 60000);
        proc.stdout.on('data', (d) => {
            out += d;
            const nl = out.indexOf('\n');
            if (nl >= 0 && !seen) {
                seen = true;
                clearTimeout(timer);
                res(JSON.parse(out.slice(0, nl)));
            }
        });
        proc.on('exit', () => { clearTimeout(timer); rej(new Error(`server exited: ${err}`)); });
    });
    const base = `${opts.scheme ?? 'http'}://${listening.address}`;
    return {
        base,
        url: (path = '/mcp') => new URL(base + path),
        token,
        tokenFile,
        proc,
        listening,
        stderr: () => err,
        // the access log's request lines (after the listening line)
        access: () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
            .filter((o) => o.method),
        exited,
        // SIGTERM, then the exit status
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
            const r = await exited;
            rmSync(dir, { recursive: true, force: true });
            return r;
        },
    };
}

// The SDK's Streamable HTTP client transport, with the bearer token.
export function httpTransport(server, path = '/mcp', token = server.token, extra = {}) {
    return new StreamableHTTPClientTransport(server.url(path), {
        requestInit: { headers: { Authorization: `Bearer ${token}`, ...extra } },
    });
}

// One raw request (fetch): the status, headers and body text.
export async function raw(server, { method = 'POST', path = '/mcp', headers = {}, body, token = server.token,
                                    signal } = {}) {
    const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers };
    if (token !== null) h.Authorization = `Bearer ${token}`;
    const r = await fetch(server.url(path), {
        method, headers: h, signal,
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: r.status, headers: r.headers, text: await r.text() };
}

export const initParams = {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' },
};
