#include "cmds.h"
int cmd_run(int argc, char **argv) { (void)argc; (void)argv; return cli_failf("run: not built yet"); }
