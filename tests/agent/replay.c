/* Replays fuzz corpora through the agent parsers' plain entry points, as an
 * ordinary test (crun's tests_libcrun_fuzzer.c does the same): any crash,
 * sanitizer report or broken invariant (the entry points abort) fails it.
 * usage: agent_fuzz_replay (sse|text) DIR [(sse|text) DIR]... */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "sse.h"
#include "textproto.h"
#include "util.h"

static int replay(const char *kind, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s\n", dir);
        return -1;
    }
    int dfd = dirfd(d), n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *buf = NULL;
        size_t len = 0;
        txbox_error err = {0};
        if (read_file_at(dfd, e->d_name, 1 << 20, &buf, &len, &err) < 0) {
            fprintf(stderr, "replay: %s/%s: %s\n", dir, e->d_name, err.msg);
            closedir(d);
            return -1;
        }
        if (!strcmp(kind, "sse")) {
            agent_fuzz_sse((const uint8_t *)buf, len);
            agent_fuzz_chat_stream((const uint8_t *)buf, len);
        } else {
            agent_fuzz_textproto((const uint8_t *)buf, len);
        }
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d %s inputs from %s\n", n, kind, dir);
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: %s (sse|text) DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "sse") && strcmp(argv[i], "text")) {
            fprintf(stderr, "replay: unknown kind %s\n", argv[i]);
            return 2;
        }
        if (replay(argv[i], argv[i + 1]) <= 0) {
            fprintf(stderr, "replay: no inputs in %s\n", argv[i + 1]);
            return 1;
        }
    }
    return 0;
}
