// `txbox mcp --listen`: what the Streamable HTTP transport adds to the
// stdio server (tokens, sessions, workspaces, resumption, limits), through
// the official SDK's HTTP client where a client would go, raw fetch where
// the test needs the bytes. One case per call:
//
//   node tests/mcp/http.mjs TXBOX WORKSPACE CASE [ARG...]
//
// CASE: auth | sessions | delete_running | workspaces WS2 | resume | resume_sdk | origin |
// limits | idle | stop | tls CERT KEY | plain_refused. WORKSPACE (and
// WS2) must be existing directories the test may fill. Prints "ok N - ..."
// lines and a summary; exits 1 if anything failed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { check, finish } from './tap.mjs';
import { httpTransport, initParams, newToken, raw, sanitizerReports, startServer } from './httpserver.mjs';

const [txbox, ws, which, ...rest] = process.argv.slice(2);
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
// A mark of this run in commands, to find them with ps (other tests may
// run commands that look alike meanwhile).
const mark = `m${process.pid}x${Date.now() % 100000}`;
const running = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes(mark);
async function untilRunning() {
    for (let i = 0; i < 200 && !running(); i++)
        await sleep(100);
}

async function expectError(promise) {
    try {
        await promise;
        return null;
    } catch (e) {
        return e;
    }
}

async function connect(server, path = '/mcp', token = server.token) {
    const transport = httpTransport(server, path, token);
    const client = new Client({ name: 'txbox-http-test', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
}

function text(r) {
    return r?.content?.[0]?.text ?? '';
}

function status(dir) {
    return JSON.parse(execFileSync(txbox, ['status', '--json', '-C', dir], { encoding: 'utf8' })).transactions;
}

function logOf(dir) {
    return JSON.parse(execFileSync(txbox, ['log', '--json', '-C', dir], { encoding: 'utf8' }));
}

// A raw session: initialize, then notifications/initialized; its id.
async function rawSession(server, path = '/mcp') {
    const r = await raw(server, { path, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
    const sid = r.headers.get('mcp-session-id');
    await raw(server, { path, headers: { 'Mcp-Session-Id': sid },
                        body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
    return sid;
}

// Reads SSE events from a fetch response until pred(events) holds or the
// stream ends; returns the events ({id, data}) seen.
async function readEvents(resp, pred = () => false) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    const events = [];
    for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let k;
        while ((k = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, k);
            buf = buf.slice(k + 2);
            const ev = { id: null, data: null };
            for (const line of block.split('\n')) {
                if (line.startsWith('id: ')) ev.id = line.slice(4);
                else if (line.startsWith('data:')) ev.data = line.slice(5).trim();
            }
            if (ev.id !== null || ev.data !== null) events.push(ev);
        }
        if (pred(events)) {
            await reader.cancel().catch(() => {});
            break;
        }
    }
    return events;
}

const cases = {
    // a wrong or missing token is refused with 401 and the Bearer challenge;
    // the right one works; a token file replaced (as a Secret is) takes
    // effect at once; no token appears in any log line
    async auth() {
        // the token file as a Kubernetes Secret volume holds it: token ->
        // ..data/token, ..data -> ..DATE/, replaced by swapping ..data
        const secret = mkdtempSync(join(tmpdir(), 'txbox-secret-'));
        process.on('exit', () => rmSync(secret, { recursive: true, force: true }));
        const first = newToken();
        const version = (name, tok) => {
            mkdirSync(join(secret, name));
            writeFileSync(join(secret, name, 'token'), `${tok}\n`);
        };
        version('..v1', first);
        symlinkSync('..v1', join(secret, '..data'));
        symlinkSync('..data/token', join(secret, 'token'));
        const server = await startServer(txbox, ['-C', ws], { token: first, tokenFile: join(secret, 'token') });
        const wrong = newToken();
        let e = await expectError(connect(server, '/mcp', wrong));
        check('a wrong token: the SDK client gets 401', e instanceof StreamableHTTPError && e.code === 401, `${e}`);
        let r = await raw(server, { token: null, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('no token: 401 with WWW-Authenticate: Bearer', r.status === 401 &&
              /^Bearer realm="txbox"$/.test(r.headers.get('www-authenticate') ?? ''), r);
        r = await raw(server, { token: wrong, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('a wrong token: 401, error="invalid_token"', r.status === 401 &&
              /error="invalid_token"/.test(r.headers.get('www-authenticate') ?? ''), r);
        r = await raw(server, { headers: { Authorization: `Basic ${Buffer.from(`u:${server.token}`).toString('base64')}` },
                                token: null, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
        check('the token sent as Basic: 401', r.status === 401, r);
        r = await raw(server, { headers: { Authorization: `Bearer ${server.token}x` }, token: null,
                                body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
        check('the token with a byte more: 401', r.status === 401, r);
        r = await raw(server, { headers: { Authorization: `Bearer ${server.token.slice(0, -1)}` }, token: null,
                                body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
        check('the token with a byte less: 401', r.status === 401, r);
        const { client, transport } = await connect(server);
        r = await client.callTool({ name: 'run', arguments: { command: 'echo in > auth.txt' } });
        check('the right token: a run commits', /^committed/.test(text(r)) && existsSync(join(ws, 'auth.txt')), r);
        // the Secret is updated: a new version, ..data swapped to it
        const fresh = newToken();
        version('..v2', fresh);
        symlinkSync('..v2', join(secret, '..data.tmp'));
        renameSync(join(secret, '..data.tmp'), join(secret, '..data'));
        e = await expectError(client.callTool({ name: 'run', arguments: { command: 'echo x > old-token.txt' } }));
        check('after the Secret changed, the old token is refused (401)',
              e instanceof StreamableHTTPError && e.code === 401 && !existsSync(join(ws, 'old-token.txt')), `${e}`);
        const sid = transport.sessionId;
        r = await raw(server, { token: fresh, headers: { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' },
                                body: { jsonrpc: '2.0', id: 9, method: 'ping' } });
        check('the new token works, for the same session', r.status === 200 && /"result":\{\}/.test(r.text), r);
        writeFileSync(join(secret, '..v2', 'token'), 'short\n');
        r = await raw(server, { token: fresh, headers: { 'Mcp-Session-Id': sid }, body: { jsonrpc: '2.0', id: 10, method: 'ping' } });
        check('a token file that holds no valid token refuses everything', r.status === 401, r);
        writeFileSync(join(secret, '..v2', 'token'), `${fresh}\n`);
        await client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
        const logs = server.stderr() + JSON.stringify(server.access());
        check('no token (old, new, wrong) in the server\'s stderr or access log',
              ![server.token, fresh, wrong].some((t) => logs.includes(t)));
        check('the refusals are in the access log with their status',
              server.access().filter((l) => l.status === 401).length >= 6, server.access());
    },

    // sessions: each client its own; DELETE ends one (its open transaction
    // aborted), and its id then gets 404; a request without one gets 400
    async sessions() {
        const server = await startServer(txbox, ['-C', ws]);
        const a = await connect(server);
        const b = await connect(server);
        check('two clients, two session ids', a.transport.sessionId && b.transport.sessionId &&
              a.transport.sessionId !== b.transport.sessionId, [a.transport.sessionId, b.transport.sessionId]);
        let r = await a.client.callTool({ name: 'begin', arguments: { name: 'left' } });
        const tx = /transaction (\d+)/.exec(text(r))?.[1];
        r = await a.client.callTool({ name: 'run', arguments: { command: 'echo staged > staged.txt', tx } });
        check('a staged command in the session\'s transaction', /^staged/.test(text(r)), r);
        r = await b.client.callTool({ name: 'run', arguments: { command: 'echo b > b.txt' } });
        check('the other session commits meanwhile', /^committed/.test(text(r)), r);
        const sid = a.transport.sessionId;
        r = await raw(server, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
        const report = JSON.parse(r.text || '{}');
        check('DELETE: 200, the session\'s open transaction aborted', r.status === 200 &&
              JSON.stringify(report.aborted) === JSON.stringify([tx]), r);
        check('DELETE: the transaction is closed, nothing of it applied',
              !status(ws).some((t) => t.tx === tx) && !existsSync(join(ws, 'staged.txt')), status(ws));
        r = await raw(server, { headers: { 'Mcp-Session-Id': sid }, body: { jsonrpc: '2.0', id: 3, method: 'ping' } });
        check('the ended session\'s id: 404', r.status === 404, r);
        const e = await expectError(a.client.callTool({ name: 'run', arguments: { command: 'true' } }));
        check('the SDK client of the ended session gets 404', e instanceof StreamableHTTPError && e.code === 404, `${e}`);
        r = await raw(server, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
        check('a second DELETE: 404', r.status === 404, r);
        r = await raw(server, { headers: { 'Mcp-Session-Id': 'f'.repeat(64) }, body: { jsonrpc: '2.0', id: 3, method: 'ping' } });
        check('an id never given: 404', r.status === 404, r);
        r = await raw(server, { body: { jsonrpc: '2.0', id: 3, method: 'tools/list' } });
        check('a request without Mcp-Session-Id (not initialize): 400', r.status === 400, r);
        r = await b.client.callTool({ name: 'run', arguments: { command: 'echo still > still.txt' } });
        check('the other session goes on', /^committed/.test(text(r)), r);
        r = await raw(server, { headers: { 'Mcp-Session-Id': b.transport.sessionId },
                                body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('initialize again in a session: a JSON-RPC error (-32600), the session kept', r.status === 200 &&
              /-32600/.test(r.text), r);
        await b.transport.terminateSession();
        await a.client.close();
        await b.client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
        const deletes = server.access().filter((l) => l.method === 'DELETE');
        check('each request logged with its session\'s id prefix, never the whole id',
              deletes.length === 3 && deletes[0].session === sid.slice(0, 8) &&
              !JSON.stringify(server.access()).includes(sid), deletes);
    },

    // DELETE while a command runs: it is cancelled and rolled back
    async delete_running() {
        const server = await startServer(txbox, ['-C', ws]);
        const a = await connect(server);
        const long = a.client.callTool({ name: 'run', arguments: { command: `echo partial > partial.txt; sleep 300; : ${mark}` } },
                                       undefined, { timeout: 600000 }).catch((e) => e);
        await untilRunning();
        const t0 = Date.now();
        const r = await raw(server, { method: 'DELETE', headers: { 'Mcp-Session-Id': a.transport.sessionId } });
        check('DELETE while a command runs: 200 once it has rolled back', r.status === 200, r);
        check('DELETE: it took less than 30 s', Date.now() - t0 < 30000, Date.now() - t0);
        const row = logOf(ws).find((t) => t.command?.includes('partial.txt'));
        check('the running command is logged rolled back', row?.outcome === 'rolled_back', row);
        check('nothing of it in the workspace', !existsSync(join(ws, 'partial.txt')));
        check('no command left running', !running());
        await a.client.close();
        await long;
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },

    // two named workspaces: each path its own, sessions do not cross
    async workspaces() {
        const ws2 = rest[0];
        const server = await startServer(txbox, ['--workspace', `one=${ws}`, '--workspace', `two=${ws2}`]);
        check('the listening line names both', server.listening.workspaces['/mcp/one'] && server.listening.workspaces['/mcp/two'],
              server.listening);
        let r = await raw(server, { body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('/mcp without -C: 404', r.status === 404, r);
        r = await raw(server, { path: '/mcp/three', body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('an unknown name: 404', r.status === 404, r);
        const one = await connect(server, '/mcp/one');
        const two = await connect(server, '/mcp/two');
        r = await one.client.callTool({ name: 'run', arguments: { command: 'echo one > which.txt' } });
        check('a run through /mcp/one commits in the first workspace', /^committed/.test(text(r)) &&
              readFileSync(join(ws, 'which.txt'), 'utf8') === 'one\n' && !existsSync(join(ws2, 'which.txt')), r);
        r = await two.client.callTool({ name: 'run', arguments: { command: 'echo two > which.txt; ls' } });
        check('a run through /mcp/two commits in the second, and sees only it',
              /^committed/.test(text(r)) && readFileSync(join(ws2, 'which.txt'), 'utf8') === 'two\n' &&
              readFileSync(join(ws, 'which.txt'), 'utf8') === 'one\n', r);
        r = await one.client.callTool({ name: 'log', arguments: {} });
        check('each workspace\'s log has its own commits only', (text(r).match(/which\.txt/g) ?? []).length === 1, text(r));
        r = await raw(server, { path: '/mcp/two', headers: { 'Mcp-Session-Id': one.transport.sessionId },
                                body: { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'run', arguments: { command: 'echo x > cross.txt' } } } });
        check('a session of /mcp/one used on /mcp/two: 404, nothing run', r.status === 404 &&
              !existsSync(join(ws, 'cross.txt')) && !existsSync(join(ws2, 'cross.txt')), r);
        await one.transport.terminateSession();
        await two.transport.terminateSession();
        await one.client.close();
        await two.client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },

    // a broken connection: the stream resumes with GET and Last-Event-ID
    async resume() {
        const server = await startServer(txbox, ['-C', ws]);
        const sid = await rawSession(server);
        const ac = new AbortController();
        const resp = await fetch(server.url(), {
            method: 'POST', signal: ac.signal,
            headers: { Authorization: `Bearer ${server.token}`, 'Content-Type': 'application/json',
                       Accept: 'application/json, text/event-stream', 'Mcp-Session-Id': sid },
            body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call',
                                   params: { name: 'run', arguments: { command: 'sleep 3; echo resumed > resumed.txt' },
                                             _meta: { progressToken: 'p' } } }),
        });
        check('tools/call: an SSE stream', resp.status === 200 &&
              resp.headers.get('content-type') === 'text/event-stream', resp.headers.get('content-type'));
        const first = await readEvents(resp, (ev) => ev.length >= 2);
        check('first a priming event (an id, no data), then a progress notification',
              first[0]?.id?.endsWith('-0') && !first[0].data && /notifications\/progress/.test(first[1]?.data ?? ''), first);
        ac.abort();
        const last = first[first.length - 1].id;
        await sleep(200);
        const r2 = await fetch(server.url(), {
            headers: { Authorization: `Bearer ${server.token}`, Accept: 'text/event-stream', 'Mcp-Session-Id': sid,
                       'Last-Event-ID': last },
        });
        check('GET with Last-Event-ID: the stream again', r2.status === 200, r2.status);
        const more = await readEvents(r2);
        const answer = more.find((e) => /"id":7/.test(e.data ?? ''));
        check('the rest of it: the answer, after the last event seen', answer && /committed/.test(answer.data) &&
              more.every((e) => e.id > last || e.id.length > last.length), more);
        check('the command committed once', readFileSync(join(ws, 'resumed.txt'), 'utf8') === 'resumed\n' &&
              logOf(ws).filter((t) => t.command?.includes('resumed.txt')).length === 1);
        let r = await raw(server, { method: 'GET', headers: { 'Mcp-Session-Id': sid, 'Last-Event-ID': last, Accept: 'text/event-stream' } });
        check('the stream delivered whole is gone: 400', r.status === 400, r);
        r = await raw(server, { method: 'GET', headers: { 'Mcp-Session-Id': sid, Accept: 'text/event-stream' } });
        check('GET without Last-Event-ID: 405 (no server stream)', r.status === 405 &&
              !/GET/.test(r.headers.get('allow') ?? 'GET'), r);
        r = await raw(server, { method: 'GET', headers: { 'Mcp-Session-Id': sid, 'Last-Event-ID': 'x; rm', Accept: 'text/event-stream' } });
        check('a malformed Last-Event-ID: 400', r.status === 400, r);
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },

    // the SDK's own client resumes: a proxy cuts the connection of the
    // first stream that carries a progress notification
    async resume_sdk() {
        const server = await startServer(txbox, ['-C', ws]);
        const target = new URL(server.base);
        let cuts = 0;
        const proxy = net.createServer((c) => {
            const s = net.connect(Number(target.port), target.hostname);
            c.on('data', (d) => s.write(d));
            s.on('data', (d) => {
                if (!cuts && d.includes('notifications/progress')) {
                    cuts++;
                    c.write(d, () => { c.destroy(); s.destroy(); });
                    return;
                }
                c.write(d);
            });
            c.on('error', () => s.destroy());
            s.on('error', () => c.destroy());
            c.on('end', () => s.end());
            s.on('end', () => c.end());
        });
        await new Promise((res) => proxy.listen(0, '127.0.0.1', res));
        const viaProxy = { ...server, url: (path = '/mcp') => new URL(`http://127.0.0.1:${proxy.address().port}${path}`) };
        const a = await connect(viaProxy);
        const progress = [];
        const r = await a.client.callTool({ name: 'run', arguments: { command: 'sleep 3; echo sdk > sdk.txt' } },
                                          undefined, { onprogress: (p) => progress.push(p.progress), timeout: 120000 });
        check('the proxy cut the stream once', cuts === 1, cuts);
        check('the call still gets its answer: committed', /^committed/.test(text(r)), r);
        check('the command ran once', readFileSync(join(ws, 'sdk.txt'), 'utf8') === 'sdk\n' &&
              logOf(ws).filter((t) => t.command?.includes('sdk.txt')).length === 1);
        check('progress went on after the cut, without repeats', progress.length >= 2 &&
              progress.every((p, i) => i === 0 || p > progress[i - 1]), progress);
        await a.transport.terminateSession();
        await a.client.close();
        proxy.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
        // read after the server stopped: a request's line is written when
        // the request ends, which may be after the client read its answer
        const resumed = server.access().filter((l) => l.method === 'GET' && l.status === 200);
        check('the SDK resumed with GET and Last-Event-ID', resumed.length >= 1 && /resume/.test(resumed[0].rpc ?? ''),
              server.access().slice(-4));
    },

    // Origin: refused unless allowed (DNS rebinding); an allowed one gets CORS
    async origin() {
        const server = await startServer(txbox, ['-C', ws, '--allow-origin', 'https://ok.example']);
        let r = await raw(server, { headers: { Origin: 'http://evil.example' },
                                    body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('an Origin not allowed: 403, even with the token', r.status === 403, r);
        r = await raw(server, { headers: { Origin: 'https://ok.example' },
                                body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams } });
        check('an allowed Origin: 200, with Access-Control-Allow-Origin', r.status === 200 &&
              r.headers.get('access-control-allow-origin') === 'https://ok.example', r);
        r = await raw(server, { method: 'OPTIONS', token: null, headers: { Origin: 'https://ok.example' } });
        check('a preflight from it: 204, the methods and headers allowed', r.status === 204 &&
              /Mcp-Session-Id/.test(r.headers.get('access-control-allow-headers') ?? ''), r);
        r = await raw(server, { method: 'OPTIONS', token: null, headers: { Origin: 'http://evil.example' } });
        check('a preflight from another: 403', r.status === 403, r);
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },

    // caps on what comes from the network
    async limits() {
        const server = await startServer(txbox, ['-C', ws, '--max-sessions', '2', '--session-calls', '1']);
        const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: initParams };
        let r = await raw(server, { body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"${'a'.repeat(5 << 20)}"}}` });
        check('a 5 MiB body: 413', r.status === 413, r.status);
        r = await raw(server, { headers: { 'X-Big': 'b'.repeat(100 << 10) }, body: init });
        check('100 KiB of headers: refused (431)', r.status === 431 || r.status === 413, r.status);
        r = await raw(server, { headers: { 'Content-Type': 'text/plain' }, body: init });
        check('Content-Type text/plain: 415', r.status === 415, r);
        r = await raw(server, { headers: { Accept: 'text/html' }, body: init });
        check('Accept: text/html: 406', r.status === 406, r);
        r = await raw(server, { headers: { 'MCP-Protocol-Version': '1999-01-01' }, body: init });
        check('an unknown MCP-Protocol-Version: 400', r.status === 400, r);
        r = await raw(server, { body: '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' });
        check('a batch: 400 with -32600', r.status === 400 && /-32600/.test(r.text), r);
        r = await raw(server, { body: '{"jsonrpc":' });
        check('not JSON: 400 with -32700', r.status === 400 && /-32700/.test(r.text), r);
        r = await raw(server, { method: 'PUT', body: init });
        check('PUT: 405', r.status === 405, r);
        r = await raw(server, { headers: { 'Mcp-Session-Id': 'a\u0001b' }, body: init }).catch((e) => ({ status: 'fetch refused' }));
        check('a session id with a control byte: 400 (or the client refuses to send it)',
              r.status === 400 || r.status === 'fetch refused', r.status);
        r = await fetch(server.url(), { method: 'POST', body: JSON.stringify(init),
                                        headers: [['Authorization', `Bearer ${server.token}`],
                                                  ['Content-Type', 'application/json'],
                                                  ['Mcp-Session-Id', 'a'], ['Mcp-Session-Id', 'b']] });
        check('a header we read given twice: 400', r.status === 400, r.status);
        const a = await connect(server);
        const b = await connect(server);
        r = await raw(server, { body: init });
        check('a third session over --max-sessions 2: 503', r.status === 503, r);
        const long = a.client.callTool({ name: 'run', arguments: { command: 'sleep 2' } });
        await sleep(300);
        const busy = await expectError(a.client.callTool({ name: 'run', arguments: { command: 'true' } }));
        check('a second call in flight over --session-calls 1: -32000 busy', busy?.code === -32000 &&
              /busy/.test(busy.message), `${busy}`);
        r = await b.client.callTool({ name: 'run', arguments: { command: 'true' } });
        check('another session is not held up by it', !r.isError, r);
        check('the first call finishes', /^committed|^read_only|exit 0/.test(text(await long)));
        await a.transport.terminateSession();
        await b.transport.terminateSession();
        await a.client.close();
        await b.client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
        check('no crash report', !/AddressSanitizer|runtime error/.test(server.stderr()), server.stderr().slice(-2000));
    },

    // a session with no request and no call for --session-idle ends
    async idle() {
        const server = await startServer(txbox, ['-C', ws, '--session-idle', '2']);
        const a = await connect(server);
        let r = await a.client.callTool({ name: 'begin', arguments: {} });
        const tx = /transaction (\d+)/.exec(text(r))?.[1];
        r = await a.client.callTool({ name: 'run', arguments: { command: 'sleep 3; echo slow > slow.txt' } });
        check('a call longer than the idle time is not cut', /^committed/.test(text(r)), r);
        await sleep(4500);
        check('after the idle time: its open transaction aborted', !status(ws).some((t) => t.tx === tx), status(ws));
        const e = await expectError(a.client.callTool({ name: 'run', arguments: { command: 'true' } }));
        check('the expired session: 404', e instanceof StreamableHTTPError && e.code === 404, `${e}`);
        check('the server says why', /idle for 2 s/.test(server.stderr()), server.stderr().slice(-1000));
        await a.client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },

    // SIGTERM with a command running: answered (rolled back), transactions
    // aborted, status 0
    async stop() {
        const server = await startServer(txbox, ['-C', ws]);
        const a = await connect(server);
        let r = await a.client.callTool({ name: 'begin', arguments: {} });
        const tx = /transaction (\d+)/.exec(text(r))?.[1];
        const long = a.client.callTool({ name: 'run', arguments: { command: `echo p > stopped.txt; sleep 300; : ${mark}` } })
            .catch((e) => e);
        await untilRunning();
        const { code } = await server.stop();
        check('SIGTERM: status 0', code === 0, code);
        r = await long;
        check('the running call is answered: rolled back', /rolled back|rolled_back/.test(text(r)), r);
        check('nothing of it in the workspace', !existsSync(join(ws, 'stopped.txt')));
        check('no command left running', !running());
        check('the session\'s transaction aborted', !status(ws).some((t) => t.tx === tx), status(ws));
        await a.client.close();
    },

    // TLS: the SDK client over https with the test's own CA (NODE_EXTRA_CA_CERTS)
    async tls() {
        const [cert, key] = rest;
        const server = await startServer(txbox, ['-C', ws, '--tls-cert', cert, '--tls-key', key], { scheme: 'https' });
        const base = server.base;
        check('the listening line says https', server.listening.scheme === 'https', server.listening);
        const a = await connect(server);
        const r = await a.client.callTool({ name: 'run', arguments: { command: 'echo tls > tls.txt' } });
        check('over https: a run commits', /^committed/.test(text(r)) && existsSync(join(ws, 'tls.txt')), r);
        const e = await expectError(fetch(base.replace('https:', 'http:') + '/mcp', { method: 'POST' }));
        const plain = e ? 'refused' : 'answered';
        check('plain HTTP to the TLS port gets no answer', plain === 'refused', plain);
        await a.transport.terminateSession();
        await a.client.close();
        const { code } = await server.stop();
        check('the server stops with status 0', code === 0, code);
    },
};

if (!cases[which]) {
    console.error(`unknown case ${which}`);
    process.exit(2);
}
try {
    await cases[which]();
} catch (e) {
    check('no unexpected exception', false, `${e?.stack ?? e}`);
}
const reports = sanitizerReports();
check('no sanitizer report from any server', reports.length === 0, reports.join('\n').slice(-3000));
finish();
