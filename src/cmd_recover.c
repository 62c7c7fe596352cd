/* txbox recover: finish or undo what a crash interrupted. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cmds.h"

/* Is dir a directory without .txbox/, i.e. one that never ran a
 * transaction? After a crash, scripts run `txbox recover` blindly: there is
 * nothing to recover there, which is not an error. */
static bool never_used(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool none = fstatat(fd, ".txbox", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
    close(fd);
    return none;
}

static const char usage[] = "usage: txbox recover [-C DIR] [--json]\n\n"
                            "Rolls every interrupted commit forward (its journal was complete), or\n"
                            "back from its pre-images when it cannot be finished or its journal is\n"
                            "damaged, and discards every transaction whose process died before its\n"
                            "commit point.\n"
                            "Every txbox command does this first; this command also reports it.";

int cmd_recover(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_LONG_JSON,
        CLI_LONG_HELP,
        {0},
    };
    cli_opts cli = {
        .name = "recover", .usage = usage, .shorts = "+C:h", .longs = opts, .argc = argc, .argv = argv};
    if (cli_opt_next(&cli) == CLI_OPT_STOP)
        return cli.status;
    if (optind < argc)
        return cli_usage(argc, argv, "recover: unexpected argument '%s'", argv[optind]);
    txbox_error err = {0};
    txbox_ws *ws = NULL;
    char *report = NULL;
    int rc = 0;
    if (txbox_ws_open(cli.dir, TXBOX_WS_NO_RECOVER, &ws, &err) == 0) {
        rc = txbox_recover(ws, &report, &err);
        txbox_ws_close(ws);
    } else if (!(err.code == ENOENT && never_used(cli.dir))) {
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    }
    if (rc < 0) {
        free(report);
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    }
    if (cli.json) {
        printf("%s\n", report ? report : "{\"rolled_forward\":[],\"rolled_back\":[],\"failed\":[]}");
    } else {
        json_t *o = report ? json_loads(report, 0, NULL) : NULL;
        size_t f = json_array_size(json_object_get(o, "rolled_forward"));
        size_t b = json_array_size(json_object_get(o, "rolled_back"));
        if (!f && !b)
            printf("txbox: nothing to recover: no interrupted transaction\n");
        else
            printf(
                "txbox: recovered: %zu interrupted commit(s) completed, %zu unfinished transaction(s) rolled back\n",
                f, b);
        json_decref(o);
    }
    free(report);
    return 0;
}
