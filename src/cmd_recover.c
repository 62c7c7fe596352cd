#include "cmds.h"
int cmd_recover(int argc, char **argv) { (void)argc; (void)argv; return cli_failf("recover: not built yet"); }
