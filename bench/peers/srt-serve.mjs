// bench/peers/srt-serve.mjs: srt's library as an agent embeds it, for
// bench/run's srt-lib method.
//
//     node bench/peers/srt-serve.mjs SETTINGS SOCKET     (cwd: the workspace)
//
// Starts node, loads @anthropic-ai/sandbox-runtime and initializes it with
// SETTINGS (its proxy and socat bridges) once, then prints "ready" and serves
// one request per connection on the Unix socket SOCKET:
//     {"cmd": "...", "stderr": "/path"}\n  ->  {"code": N}\n
// For each it does what an embedding agent does per command: wrapWithSandbox
// (which scans the current directory for the files srt write-protects), spawn
// the wrapped string with a shell, wait, cleanupAfterCommand. The command runs
// as `sh -c CMD`, as under every other method; stdin and stdout are
// /dev/null, stderr goes to the named file. Exits on SIGTERM, SIGINT, or the
// end of its stdin.
import fs from 'node:fs';
import net from 'node:net';
import { constants } from 'node:os';
import { spawn } from 'node:child_process';
import { SandboxManager, SandboxRuntimeConfigSchema } from '@anthropic-ai/sandbox-runtime';

const [settings, socketPath] = process.argv.slice(2);
if (!settings || !socketPath) {
  console.error('usage: node srt-serve.mjs SETTINGS SOCKET');
  process.exit(2);
}
const config = SandboxRuntimeConfigSchema.parse(JSON.parse(fs.readFileSync(settings, 'utf-8')));
await SandboxManager.initialize(config);

const quote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

async function runOne(req) {
  const wrapped = await SandboxManager.wrapWithSandbox(`sh -c ${quote(req.cmd)}`);
  const err = fs.openSync(req.stderr, 'w');
  try {
    return await new Promise((resolve) => {
      const child = spawn(wrapped, { shell: true, stdio: ['ignore', 'ignore', err] });
      child.on('error', (e) => {
        fs.writeSync(err, `srt-serve: ${e.message}\n`);
        resolve(127);
      });
      child.on('exit', (code, signal) => {
        resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0));
      });
    });
  } finally {
    SandboxManager.cleanupAfterCommand();
    fs.closeSync(err);
  }
}

fs.rmSync(socketPath, { force: true });
const server = net.createServer((conn) => {
  let buf = '';
  conn.setEncoding('utf-8');
  conn.on('data', (d) => {
    buf += d;
    const nl = buf.indexOf('\n');
    if (nl < 0) return;
    let req;
    try {
      req = JSON.parse(buf.slice(0, nl));
    } catch (e) {
      conn.end(JSON.stringify({ code: 2, error: `bad request: ${e.message}` }) + '\n');
      return;
    }
    runOne(req).then(
      (code) => conn.end(JSON.stringify({ code }) + '\n'),
      (e) => conn.end(JSON.stringify({ code: 125, error: String(e?.message ?? e) }) + '\n'),
    );
  });
  conn.on('error', () => {});
});
const stop = () => {
  server.close();
  fs.rmSync(socketPath, { force: true });
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// stdin is a pipe from bench/run: its end (bench/run exited, even by SIGKILL)
// stops the server too.
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
server.listen(socketPath, () => process.stdout.write('ready\n'));
