/* The network proxy's pure pieces: the request parser, the allowlist and
 * the address classes (lib/sandbox/netproxy.c). The proxy itself is tested through
 * txbox (tests/integration/net_proxy.bats). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "netproxy.h"

static int parse(const char *s, struct np_req *rq, const char **why)
{
    return np_parse_request(s, strlen(s), rq, why);
}

static void parses_connect_and_absolute_uris(void **state)
{
    (void)state;
    static struct np_req rq;
    const char *why;
    const char *c = "CONNECT Registry.NPMJS.org.:443 HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(parse(c, &rq, &why), (int)strlen(c));
    assert_true(rq.connect);
    assert_string_equal(rq.host, "registry.npmjs.org");
    assert_int_equal(rq.port, 443);
    const char *g = "GET http://pypi.org/simple/x?y=1 HTTP/1.0\r\nAccept: */*\r\n\r\nrest";
    assert_int_equal(parse(g, &rq, &why), (int)strlen(g) - 4);
    assert_false(rq.connect);
    assert_string_equal(rq.host, "pypi.org");
    assert_int_equal(rq.port, 80);
    assert_string_equal(rq.path, "/simple/x?y=1");
    assert_int_equal(parse("GET http://a.example?q HTTP/1.1\r\n\r\n", &rq, &why) > 0, 1);
    assert_string_equal(rq.path, "/?q");
    assert_int_equal(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &rq, &why) > 0, 1);
    assert_string_equal(rq.host, "::1");
    assert_int_equal(rq.port, 8443);
}

static void refuses_malformed_and_oversized_heads(void **state)
{
    (void)state;
    static struct np_req rq;
    const char *why;
    assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\nHost: a", &rq, &why), 0); /* more to come */
    const char *bad[] = {
        "CONNECT a.example HTTP/1.1\r\n\r\n", /* no port */
        "CONNECT a.example:0 HTTP/1.1\r\n\r\n",
        "CONNECT a.example:65536 HTTP/1.1\r\n\r\n",
        "GET https://a.example/ HTTP/1.1\r\n\r\n", /* https is CONNECT's */
        "GET /relative HTTP/1.1\r\n\r\n",
        "GET http://u:p@a.example/ HTTP/1.1\r\n\r\n",
        "GET http://a..example/ HTTP/1.1\r\n\r\n",
        "GET http://a example/ HTTP/1.1\r\n\r\n",
        "GET http://a.example/ HTTP/2\r\n\r\n",
        "get http://a.example/ HTTP/1.1\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "CONNECT [::1:443 HTTP/1.1\r\n\r\n",
        "CONNECT [nothex]:443 HTTP/1.1\r\n\r\n",
        "CONNECT a/b:443 HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why = NULL;
        if (parse(bad[i], &rq, &why) != -1)
            fail_msg("accepted: %s", bad[i]);
        assert_non_null(why);
    }
    /* a head that never ends is refused at the cap */
    char *big = malloc(NP_HEAD_MAX);
    memset(big, 'a', NP_HEAD_MAX);
    memcpy(big, "GET http://a.example/ HTTP/1.1\r\nX: ", 35);
    assert_int_equal(np_parse_request(big, NP_HEAD_MAX, &rq, &why), -1);
    assert_string_equal(why, "request head too large");
    free(big);
}

static void allowlist_matches_names_suffixes_and_addresses(void **state)
{
    (void)state;
    const char *const pats[] = {"registry.npmjs.org", "*.pythonhosted.org", "::ffff:192.0.2.1"};
    assert_true(np_domain_allowed(pats, 3, "registry.npmjs.org"));
    assert_false(np_domain_allowed(pats, 3, "npmjs.org"));
    assert_false(np_domain_allowed(pats, 3, "evil-registry.npmjs.org"));
    assert_false(np_domain_allowed(pats, 3, "registry.npmjs.org.evil.example"));
    assert_true(np_domain_allowed(pats, 3, "files.pythonhosted.org"));
    assert_true(np_domain_allowed(pats, 3, "a.b.pythonhosted.org"));
    assert_false(np_domain_allowed(pats, 3, "pythonhosted.org"));
    assert_false(np_domain_allowed(pats, 3, "evilpythonhosted.org"));
    assert_true(np_domain_allowed(pats, 3, "192.0.2.1")); /* one address, two spellings */
    assert_false(np_domain_allowed(pats, 3, "192.0.2.2"));
    assert_true(np_pattern_valid("*.npmjs.org"));
    assert_true(np_pattern_valid("127.0.0.1"));
    assert_true(np_pattern_valid("::1"));
    const char *bad[] = {"",     "*",         "*.org", "*.",  "a..b",   ".a.b",
                         "a.b.", "A.example", "a/b",   "a b", "*.*.a.b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (np_pattern_valid(bad[i]))
            fail_msg("valid: '%s'", bad[i]);
}

static bool pub(const char *ip)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1)
        s4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1)
        s6->sin6_family = AF_INET6;
    else
        fail_msg("bad address %s", ip);
    return np_addr_public((struct sockaddr *)&ss);
}

static void private_and_loopback_addresses_are_never_public(void **state)
{
    (void)state;
    const char *never[] = {"127.0.0.1",
                           "127.255.1.2",
                           "0.0.0.0",
                           "10.1.2.3",
                           "172.16.0.1",
                           "172.31.255.255",
                           "192.168.1.1",
                           "169.254.169.254",
                           "100.64.0.1",
                           "224.0.0.1",
                           "255.255.255.255",
                           "::",
                           "::1",
                           "::ffff:127.0.0.1",
                           "::ffff:10.0.0.1",
                           "64:ff9b::a9fe:a9fe",
                           "fe80::1",
                           "fc00::1",
                           "fd12::1",
                           "ff02::1",
                           "2002:7f00:1::1",
                           "::127.0.0.1"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        if (pub(never[i]))
            fail_msg("public: %s", never[i]);
    const char *ok[] = {"104.16.0.1", "151.101.1.1", "172.32.0.1", "2606:4700::1", "::ffff:8.8.8.8"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!pub(ok[i]))
            fail_msg("not public: %s", ok[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_connect_and_absolute_uris),
        cmocka_unit_test(refuses_malformed_and_oversized_heads),
        cmocka_unit_test(allowlist_matches_names_suffixes_and_addresses),
        cmocka_unit_test(private_and_loopback_addresses_are_never_public),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
