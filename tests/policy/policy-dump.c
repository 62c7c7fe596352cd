/* policy-dump [-C DIR] [--policy FILE] CMD...: shows how the engine reads
 * each command (a development aid; also run by the test suite). */
#include <stdio.h>
#include <string.h>

#include "policy/pol.h"

int main(int argc, char **argv)
{
    const char *dir = NULL, *file = NULL;
    int i = 1;
    bool examples = false;
    if (argc > 1 && !strcmp(argv[1], "--examples")) {
        examples = true;
        i++;
    }
    for (; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-C"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--policy"))
            file = argv[i + 1];
        else
            break;
    }
    txbox_policy *p;
    txbox_error err = {0};
    if (policy_load(file, dir, examples ? POLICY_EXAMPLES_NONE : POLICY_EXAMPLES_ALWAYS, &p, &err) < 0) {
        fprintf(stderr, "policy-dump: %s\n", err.msg);
        return 125;
    }
    int rc = 0;
    if (examples && policy_examples_report(p, stdout, &err) < 0)
        rc = 1;
    for (; i < argc; i++) {
        txbox_verdict v;
        if (txbox_policy_check(p, argv[i], strlen(argv[i]), &v, &err) < 0) {
            fprintf(stderr, "policy-dump: %s\n", err.msg);
            rc = 125;
            break;
        }
        printf("%s\n  => %s [%s] %s%s%s\n", argv[i], txbox_verdict_name(v.verdict), v.rule, v.reason,
               v.suggestion[0] ? " | " : "", v.suggestion);
        policy_dump(p, argv[i], strlen(argv[i]), stdout);
    }
    txbox_policy_free(p);
    return rc;
}
