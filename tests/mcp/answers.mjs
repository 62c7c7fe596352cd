// What a model is shown of `txbox mcp`'s answers, as the agent CLIs set it
// up (no --structured), read with the official TypeScript SDK client.
//
//   node tests/mcp/answers.mjs TXBOX WORKSPACE
//
// Claude Code and Codex show the model structuredContent whenever a result
// has one; so by default there is none (and no outputSchema that would
// demand it), and the one text part starts with a line saying what
// happened, then compact JSON: no protections unless asked for, and inside
// a multi-command transaction the transaction's id is the only id. Prints
// "ok N - ..." lines and "N passed, N failed"; exits 1 if anything failed.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, finish } from './tap.mjs';

const [txbox, ws] = process.argv.slice(2);
if (!txbox || !ws) {
    console.error('usage: answers.mjs TXBOX WORKSPACE');
    process.exit(2);
}
// The model's view of a result: its one text part, split in line and JSON.
function seen(r) {
    const text = r.content?.length === 1 && r.content[0].type === 'text' ? r.content[0].text : '';
    const nl = text.indexOf('\n');
    let obj = null;
    try {
        obj = JSON.parse(text.slice(nl + 1));
    } catch {
        obj = null;
    }
    return { text, line: nl < 0 ? text : text.slice(0, nl), obj, bytes: Buffer.byteLength(text) };
}

writeFileSync(join(ws, 'base.txt'), 'base\n');
let stderr = '';
const transport = new StdioClientTransport({ command: txbox, args: ['mcp', '-C', ws], stderr: 'pipe' });
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'txbox-answers', version: '1.0.0' }, { capabilities: {} });
try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    check('no tool declares an outputSchema (it would make clients show structuredContent)',
          tools.every((t) => t.outputSchema === undefined), tools.filter((t) => t.outputSchema).map((t) => t.name));
    check('run takes a protections argument', tools.find((t) => t.name === 'run')?.inputSchema?.properties?.protections?.type === 'boolean');

    let r = await client.callTool({ name: 'run', arguments: { command: 'echo hi > hello.txt; echo out' } });
    let s = seen(r);
    check('a commit: no structuredContent, one text part', r.structuredContent === undefined && r.content.length === 1, r);
    check('a commit: the first line says outcome, tx and what changed',
          /^committed tx \d+ \(exit 0\); added hello\.txt$/.test(s.line), s.line);
    check('a commit: compact JSON follows', s.obj?.outcome === 'committed' && s.obj?.changes?.added?.[0] === 'hello.txt' &&
          s.obj?.stdout === 'out\n', s.text);
    check('a commit: no protections, timings or empty fields', s.obj && !('protections' in s.obj) &&
          !('overhead_ms' in s.obj) && !('signal' in s.obj) && !('stderr' in s.obj), s.obj);
    check(`a commit's answer is small (${s.bytes} bytes)`, s.bytes < 300, s.text);

    r = await client.callTool({ name: 'run', arguments: { command: 'cat base.txt', protections: true } });
    s = seen(r);
    check('protections when asked for', typeof s.obj?.protections === 'object' && s.obj.protections.namespaces, s.text.slice(0, 600));

    r = await client.callTool({ name: 'run', arguments: { command: 'rm -rf ~' } });
    s = seen(r);
    check('blocked: the line names the rule, the reason and what to do instead',
          r.isError === true && /^blocked by rule delete-outside-workspace: .*It never ran\. Instead: /.test(s.line), s.text);

    r = await client.callTool({ name: 'run', arguments: { command: 'echo p > p.txt; exit 3' } });
    s = seen(r);
    check('rolled back: the line says so and that the workspace is as before',
          r.isError === true && /^rolled back tx \d+ \(exit 3\): .*workspace is as before/.test(s.line), s.text);

    r = await client.callTool({ name: 'begin', arguments: {} });
    s = seen(r);
    const id = s.obj?.transaction;
    check('begin: the line gives the id to pass; JSON has it as transaction',
          /^\d+$/.test(id ?? '') && s.line.includes(`"tx": "${id}"`), s.text);
    r = await client.callTool({ name: 'run', arguments: { command: 'echo a > a.txt', tx: id } });
    s = seen(r);
    check('staged: the line leads with the transaction\'s id and says to commit it',
          new RegExp(`^staged in transaction ${id} \\(exit 0\\); added a\\.txt; nothing reaches the workspace until \`commit\` with tx "${id}"$`).test(s.line), s.line);
    check('staged: JSON starts with the transaction and holds no other id',
          Object.keys(s.obj ?? {})[0] === 'transaction' && s.obj.transaction === id && !('tx' in s.obj), s.obj);
    r = await client.callTool({ name: 'run', arguments: { command: 'echo b > b.txt; false', tx: id } });
    s = seen(r);
    check('a failing command in a transaction: only its own changes go, the transaction stays open',
          new RegExp(`^rolled back \\(exit 1\\): only this command's changes were discarded; transaction ${id} stays open`).test(s.line), s.line);
    r = await client.callTool({ name: 'commit', arguments: { tx: id } });
    s = seen(r);
    check('commit: the line says committed with what changed', new RegExp(`^committed transaction ${id} \\(1 command\\): .*added a\\.txt$`).test(s.line), s.text);
    check('commit: compact JSON', s.obj?.transaction === id && s.obj?.outcome === 'committed' && !('verify' in s.obj), s.obj);

    r = await client.callTool({ name: 'check', arguments: { command: 'ls' } });
    s = seen(r);
    check('check: a line, then the verdict', /^safe \(rule [^)]+\): /.test(s.line) && s.obj?.verdict === 'safe', s.text);
    check('no crash report on stderr', !/AddressSanitizer|runtime error|Segmentation/.test(stderr), stderr);
} catch (e) {
    check('no unexpected exception', false, `${e?.stack ?? e}\nserver stderr:\n${stderr.slice(-3000)}`);
} finally {
    await client.close().catch(() => {});
}
finish();
