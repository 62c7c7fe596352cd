// The model-facing front of `txbox mcp`, through the official TypeScript
// SDK client (@modelcontextprotocol/sdk, pinned): one case per call.
//
//   node tests/mcp/front.mjs TXBOX WORKSPACE CASE
//
// CASE: textjson | annotations | progress | bash. Prints "ok - ..." or
// "not ok - ..." lines; exits 1 if anything failed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const [txbox, ws, which] = process.argv.slice(2);
let failed = 0;
function check(name, cond, detail) {
    console.log(`${cond ? 'ok' : 'not ok'} - ${name}`);
    if (!cond) {
        failed++;
        if (detail !== undefined) console.log(`#   ${JSON.stringify(detail)}`.slice(0, 3000));
    }
}

const transport = new StdioClientTransport({ command: txbox, args: ['mcp', '-C', ws, '--structured'], stderr: 'pipe' });
const client = new Client({ name: 'txbox-front-test', version: '1.0.0' });
await client.connect(transport);

const cases = {
    // structuredContent also as a TextContent block (the JSON), beside the summary
    async textjson() {
        for (const [name, args] of [['run', { command: 'echo hi > hi.txt' }], ['run', { command: 'rm -rf /' }],
                                    ['check', { command: 'ls' }], ['log', {}], ['status', {}]]) {
            const r = await client.callTool({ name, arguments: args });
            const texts = (r.content ?? []).filter((c) => c.type === 'text');
            let parsed = null;
            for (const t of texts) {
                try { parsed = parsed ?? JSON.parse(t.text); } catch { /* the summary */ }
            }
            check(`${name} ${JSON.stringify(args)}: a text part holds the structured JSON`,
                  r.structuredContent && JSON.stringify(parsed) === JSON.stringify(r.structuredContent), r.content);
            check(`${name}: the summary comes first`, texts.length >= 2 && !texts[0].text.startsWith('{'), r.content);
        }
    },
    async annotations() {
        const { tools } = await client.listTools();
        const by = Object.fromEntries(tools.map((t) => [t.name, t.annotations ?? {}]));
        for (const n of ['run', 'commit', 'undo', 'restore', 'rollback', 'abort'])
            check(`${n}: destructiveHint true, readOnlyHint false`,
                  by[n]?.destructiveHint === true && by[n]?.readOnlyHint === false, by[n]);
        for (const n of ['check', 'log', 'show', 'diff', 'status'])
            check(`${n}: readOnlyHint true`, by[n]?.readOnlyHint === true, by[n]);
        for (const n of ['begin', 'savepoint'])
            check(`${n}: neither read-only nor destructive`,
                  by[n]?.readOnlyHint === false && by[n]?.destructiveHint === false, by[n]);
        const run = tools.find((t) => t.name === 'run');
        check('run: the description says a policy rule may grant network',
              /policy rule grants it/.test(run.description) && /bash -c/.test(run.description), run.description);
    },
    // a command longer than the client's timeout survives with resetTimeoutOnProgress
    async progress() {
        const seen = [];
        const r = await client.callTool(
            { name: 'run', arguments: { command: 'for i in 1 2 3 4 5 6; do echo step$i; sleep 1; done; echo ok > p.txt' } },
            undefined, { timeout: 2500, resetTimeoutOnProgress: true, onprogress: (p) => seen.push(p) });
        check('the call completes (committed)', r.structuredContent?.outcome === 'committed', r);
        check('progress notifications arrived', seen.length >= 2, seen);
        check('progress increases', seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress), seen);
        check('a message carries recent output', seen.some((p) => /step\d/.test(p.message ?? '')), seen);
        const q = await client.callTool({ name: 'check', arguments: { command: 'ls' } });
        check('a call without a progress token still answers', q.structuredContent?.verdict === 'safe', q);
    },
    async bash() {
        const r = await client.callTool({ name: 'run', arguments: { command: 'echo {1..3} > f && [[ -f f ]]' } });
        check('run: bash syntax works', r.structuredContent?.outcome === 'committed', r);
        check('run: f holds the brace expansion', readFileSync(join(ws, 'f'), 'utf8') === '1 2 3\n');
        check('run: reports the shell', /bash$/.test(r.structuredContent?.shell ?? ''), r.structuredContent);
    },
};
try {
    await cases[which]();
} catch (e) {
    check(`${which}: no exception`, false, String(e));
}
await client.close();
process.exit(failed ? 1 : 0);
