/* txbox agent: parse the options into an agent_cfg and run the loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../cmds.h"
#include "agent.h"
#include "../run_args.h"

#define TASK_FILE_CAP (256 * 1024)

static void usage(FILE *f, const char *name)
{
    fprintf(f, "usage: txbox agent --endpoint URL --model NAME (--task TEXT | --task-file F)\n"
               "                   [-C DIR] [--max-steps N] [--token-budget N] [--api-key-env VAR]\n"
               "                   [--json] [--quiet] [--stream] [--protocol auto|tools|text]\n"
               "                   [--timeout S] [--connect-timeout S] [--idle-timeout S]\n"
               "                   [--retries N] [--retry-delay S] [--max-response-bytes N]\n"
               "                   [--command-timeout S] [--policy FILE] [--temperature T]\n"
               "                   [--max-completion-tokens N] [--result-bytes N]\n"
               "                   [--verify CMD | --no-transaction]\n"
               "\n"
               "A headless agent loop against an OpenAI-compatible chat completions server\n"
               "(vLLM, llama.cpp's server, Ollama, hosted APIs). The task is one txbox\n"
               "transaction: each command the model asks for runs in it (a failing one rolls\n"
               "back only itself), and it is committed when the model calls finish (with\n"
               "--verify, only if CMD then passes on the result), else aborted: nothing of an\n"
               "unfinished task reaches the workspace. --no-transaction commits each command\n"
               "on its own instead. See docs/agent.md.\n"
               "Exit status: 0 finished; 110 step budget, 111 token budget, 112 stopped for\n"
               "repeating a blocked/failing command, 113 model ignored the protocol, 114\n"
               "endpoint error, 115 interrupted, 116 the task's transaction conflicted at\n"
               "finish; 125 txbox error.\n");
}

static bool num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool integer(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    if (!parse_u64(s, &v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* The task file, given by the user: symlinks are followed (unlike files
 * inside a workspace); at most TASK_FILE_CAP bytes, no NUL. */
static char *read_task_file(const char *path, txbox_error *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        tx_errno(err, errno, "--task-file %s", path);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        tx_err(err, EINVAL, "--task-file %s is not a regular file", path);
        return NULL;
    }
    char *buf = xmalloc(TASK_FILE_CAP + 2);
    ssize_t n = read_all(fd, buf, TASK_FILE_CAP + 1);
    if (n < 0) {
        tx_errno(err, errno, "--task-file %s", path);
        free(buf);
        return NULL;
    }
    if (n > TASK_FILE_CAP) {
        tx_err(err, EFBIG, "--task-file %s is larger than %d bytes", path, TASK_FILE_CAP);
        free(buf);
        return NULL;
    }
    if (memchr(buf, 0, (size_t)n)) {
        tx_err(err, EINVAL, "--task-file %s contains a NUL byte", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* The command line besides the configuration: the workspace, the task,
 * the variable that holds the API key. */
struct agent_args {
    const char *dir, *task, *task_file, *key_env;
};

/* Reads the command line into cfg and a: -1 when the agent is to run,
 * else the exit status (a usage error; 0 after --help). */
static int parse_agent(int argc, char **argv, agent_cfg *cfg, struct agent_args *a)
{
    enum {
        O_ENDPOINT = 256,
        O_MODEL,
        O_TASK,
        O_TASK_FILE,
        O_MAX_STEPS,
        O_TOKENS,
        O_KEY_ENV,
        O_JSON,
        O_QUIET,
        O_STREAM,
        O_PROTOCOL,
        O_TIMEOUT,
        O_CONNECT,
        O_IDLE,
        O_RETRIES,
        O_RETRY_DELAY,
        O_MAX_BYTES,
        O_CMD_TIMEOUT,
        O_POLICY,
        O_TEMP,
        O_MAX_COMPLETION,
        O_RESULT_BYTES,
        O_VERIFY,
        O_NO_TX,
    };
    static const struct option opts[] = {
        {"endpoint", required_argument, NULL, O_ENDPOINT},
        {"model", required_argument, NULL, O_MODEL},
        {"task", required_argument, NULL, O_TASK},
        {"task-file", required_argument, NULL, O_TASK_FILE},
        {"max-steps", required_argument, NULL, O_MAX_STEPS},
        {"token-budget", required_argument, NULL, O_TOKENS},
        {"api-key-env", required_argument, NULL, O_KEY_ENV},
        {"json", no_argument, NULL, O_JSON},
        {"quiet", no_argument, NULL, O_QUIET},
        {"stream", no_argument, NULL, O_STREAM},
        {"protocol", required_argument, NULL, O_PROTOCOL},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"connect-timeout", required_argument, NULL, O_CONNECT},
        {"idle-timeout", required_argument, NULL, O_IDLE},
        {"retries", required_argument, NULL, O_RETRIES},
        {"retry-delay", required_argument, NULL, O_RETRY_DELAY},
        {"max-response-bytes", required_argument, NULL, O_MAX_BYTES},
        {"command-timeout", required_argument, NULL, O_CMD_TIMEOUT},
        {"policy", required_argument, NULL, O_POLICY},
        {"temperature", required_argument, NULL, O_TEMP},
        {"max-completion-tokens", required_argument, NULL, O_MAX_COMPLETION},
        {"result-bytes", required_argument, NULL, O_RESULT_BYTES},
        CLI_LONG_HELP,
        {"verify", required_argument, NULL, O_VERIFY},
        {"no-transaction", no_argument, NULL, O_NO_TX},
        {0},
    };
    uint64_t u;
    double d;
    cli_opts cli = {
        .name = "agent", .help = usage, .shorts = "+C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case O_ENDPOINT:
            cfg->endpoint = optarg;
            break;
        case O_MODEL:
            cfg->model = optarg;
            break;
        case O_TASK:
            a->task = optarg;
            break;
        case O_TASK_FILE:
            a->task_file = optarg;
            break;
        case O_MAX_STEPS:
            if (!integer(optarg, 1, 10000, &u))
                return cli_failf("agent: --max-steps wants a whole number 1..10000, not '%s'", optarg);
            cfg->max_steps = (int)u;
            break;
        case O_TOKENS:
            if (!integer(optarg, 1, 1000000000000ull, &u))
                return cli_failf("agent: --token-budget wants a positive whole number, not '%s'", optarg);
            cfg->token_budget = (long long)u;
            break;
        case O_KEY_ENV:
            a->key_env = optarg;
            break;
        case O_JSON:
            cfg->json = true;
            break;
        case O_QUIET:
            cfg->quiet = true;
            break;
        case O_STREAM:
            cfg->stream = true;
            break;
        case O_PROTOCOL:
            if (!strcmp(optarg, "auto"))
                cfg->protocol = PROTO_AUTO;
            else if (!strcmp(optarg, "tools"))
                cfg->protocol = PROTO_TOOLS;
            else if (!strcmp(optarg, "text"))
                cfg->protocol = PROTO_TEXT;
            else
                return cli_failf("agent: --protocol is auto, tools or text, not '%s'", optarg);
            break;
        case O_TIMEOUT:
            if (!num(optarg, 0.1, 86400, &cfg->llm.timeout_s))
                return cli_failf("agent: --timeout wants seconds (0.1..86400), not '%s'", optarg);
            break;
        case O_CONNECT:
            if (!num(optarg, 0.1, 3600, &cfg->llm.connect_timeout_s))
                return cli_failf("agent: --connect-timeout wants seconds (0.1..3600), not '%s'", optarg);
            break;
        case O_IDLE:
            if (!num(optarg, 1, 86400, &cfg->llm.idle_timeout_s))
                return cli_failf("agent: --idle-timeout wants seconds (1..86400), not '%s'", optarg);
            break;
        case O_RETRIES:
            if (!integer(optarg, 0, 20, &u))
                return cli_failf("agent: --retries wants a whole number 0..20, not '%s'", optarg);
            cfg->llm.retries = (int)u;
            break;
        case O_RETRY_DELAY:
            if (!num(optarg, 0, 60, &cfg->llm.retry_delay_s))
                return cli_failf("agent: --retry-delay wants seconds (0..60), not '%s'", optarg);
            break;
        case O_MAX_BYTES:
            if (!integer(optarg, 1024, 1ull << 30, &u))
                return cli_failf("agent: --max-response-bytes wants 1024..1073741824, not '%s'", optarg);
            cfg->llm.max_bytes = (size_t)u;
            break;
        case O_CMD_TIMEOUT:
            if (!num(optarg, 0.1, 604800, &cfg->command_timeout_s))
                return cli_failf("agent: --command-timeout wants seconds (0.1..604800), not '%s'", optarg);
            break;
        case O_POLICY:
            cfg->policy = optarg;
            break;
        case O_TEMP:
            if (!num(optarg, 0, 2, &d))
                return cli_failf("agent: --temperature wants a number 0..2, not '%s'", optarg);
            cfg->temperature = d;
            break;
        case O_MAX_COMPLETION:
            if (!integer(optarg, 1, 10000000, &u))
                return cli_failf("agent: --max-completion-tokens wants a positive whole number, not '%s'",
                                 optarg);
            cfg->max_completion_tokens = (long)u;
            break;
        case O_RESULT_BYTES:
            if (!integer(optarg, 256, 1 << 20, &u))
                return cli_failf("agent: --result-bytes wants 256..1048576, not '%s'", optarg);
            cfg->result_bytes = (size_t)u;
            break;
        case O_VERIFY:
            if (!*optarg || strlen(optarg) > 65536)
                return cli_failf("agent: --verify wants a command of 1 to 65536 bytes");
            cfg->verify = optarg;
            break;
        case O_NO_TX:
            cfg->per_command = true;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    a->dir = cli.dir;
    if (optind < argc)
        return cli_failf("agent: unexpected argument '%s' (the task goes in --task)", argv[optind]);
    if (!cfg->endpoint)
        return cli_failf("agent: --endpoint URL is required");
    if (!cfg->model || !*cfg->model)
        return cli_failf("agent: --model NAME is required");
    if (cfg->verify && cfg->per_command)
        return cli_failf("agent: --verify gates the commit of the task's transaction; it does not go "
                         "with --no-transaction");
    if (!!a->task == !!a->task_file)
        return cli_failf("agent: give the task with exactly one of --task TEXT or --task-file F");
    return -1;
}

/* The task, from --task or read from --task-file (*task_buf holds it):
 * -1 when it is one, else the exit status. */
static int take_task(agent_cfg *cfg, struct agent_args *a, char **task_buf)
{
    txbox_error err = {0};
    if (a->task_file) {
        *task_buf = read_task_file(a->task_file, &err);
        if (!*task_buf)
            return cli_fail(&err);
        a->task = *task_buf;
    }
    if (!*a->task || strspn(a->task, " \t\r\n") == strlen(a->task))
        return cli_failf("agent: the task is empty");
    json_t *jt = json_string(a->task);
    if (!jt)
        return cli_failf("agent: the task is not valid UTF-8");
    json_decref(jt);
    cfg->task = a->task;
    return -1;
}

/* The API key from the variable key_env: -1 when it is usable, else the
 * exit status. */
static int take_api_key(agent_cfg *cfg, const char *key_env)
{
    const char *k = getenv(key_env);
    if (!k || !*k)
        return cli_failf("agent: --api-key-env %s: that environment variable is not set or empty", key_env);
    for (const char *p = k; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return cli_failf("agent: the key in %s contains a blank or unprintable character", key_env);
    cfg->llm.api_key = k;
    cfg->api_key_env = key_env;
    return -1;
}

int cmd_agent(int argc, char **argv)
{
    agent_cfg cfg = {
        .max_steps = 30,
        .token_budget = 200000,
        .command_timeout_s = 600,
        .temperature = -1,
        .result_bytes = 2000,
        .llm = {.connect_timeout_s = 10,
                .timeout_s = 600,
                .idle_timeout_s = 120,
                .retries = 4,
                .retry_delay_s = 1,
                .max_bytes = 8 << 20,
                .content_cap = 256 << 10,
                .args_cap = 64 << 10},
    };
    struct agent_args a = {.dir = "."};
    int status = parse_agent(argc, argv, &cfg, &a);
    if (status >= 0)
        return status;
    setenv(RUN_NET_WORDS_ENV, RUN_NET_WORDS_MODEL, 1);
    _cleanup_free_ char *task_buf = NULL;
    if ((status = take_task(&cfg, &a, &task_buf)) >= 0)
        return status;
    if (a.key_env && (status = take_api_key(&cfg, a.key_env)) >= 0)
        return status;
    txbox_error err = {0};
    _cleanup_free_ char *url = llm_endpoint_url(cfg.endpoint, &err);
    if (!url)
        return cli_fail(&err);
    cfg.llm.url = url;
    _cleanup_free_ char *ws = realpath(a.dir, NULL);
    if (!ws)
        return cli_failf("agent: workspace %s: %s", a.dir, strerror(errno));
    cfg.ws = ws;
    if (cfg.policy && access(cfg.policy, R_OK) < 0)
        return cli_failf("agent: --policy %s: %s", cfg.policy, strerror(errno));
    /* absolute: the file checked here is the one every command reads,
     * whether it runs in this process or in a child started in ws */
    _cleanup_free_ char *policy = cfg.policy ? realpath(cfg.policy, NULL) : NULL;
    if (cfg.policy && !policy)
        return cli_failf("agent: --policy %s: %s", cfg.policy, strerror(errno));
    if (policy)
        cfg.policy = policy;
    return agent_run(&cfg);
}
