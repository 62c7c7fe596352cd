#include "cmds.h"
int cmd_check(int argc, char **argv) { (void)argc; (void)argv; return cli_failf("check: not built yet"); }
