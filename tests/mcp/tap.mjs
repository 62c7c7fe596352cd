// The TAP-like lines the MCP tests print: "ok N - ..." / "not ok N - ..."
// (with the detail on failure) and a closing "N passed, N failed".
let n = 0, passed = 0, failed = 0;
export function check(name, cond, detail) {
    n++;
    if (cond) {
        passed++;
        console.log(`ok ${n} - ${name}`);
    } else {
        failed++;
        console.log(`not ok ${n} - ${name}`);
        if (detail !== undefined)
            console.log(`#   ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`.slice(0, 4000));
    }
}
// Prints the summary line and exits: 1 if anything failed.
export function finish() {
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}
