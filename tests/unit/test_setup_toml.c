/* txbox setup codex: the TOML editor (src/setup_toml.c) on its own. Takes
 * [mcp_servers.txbox] (with sub-tables and our marker) out, appends a new
 * one, keeps every other byte; refuses forms it does not edit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/setup.h"

#define BLOCK SETUP_TOML_MARKER "\n[mcp_servers.txbox]\ncommand = \"/usr/local/bin/txbox\"\n"

static char *edit(const char *in, const char *block, int *rc)
{
    char *out = NULL;
    size_t len = 0;
    txbox_error err = {0};
    *rc = setup_toml_edit(in, strlen(in), block, &out, &len, &err);
    if (*rc == 0)
        assert_int_equal(strlen(out), len);
    return out;
}

static void check(const char *in, const char *block, const char *want)
{
    int rc;
    char *out = edit(in, block, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, want);
    free(out);
}

static void refused(const char *in)
{
    int rc;
    char *out = edit(in, BLOCK, &rc);
    assert_int_equal(rc, -1);
    assert_null(out);
}

static void test_add_to_empty_and_to_text(void **state)
{
    (void)state;
    check("", BLOCK, BLOCK);
    check("model = \"o3\"", BLOCK, "model = \"o3\"\n\n" BLOCK);
    check("model = \"o3\"\n\n\n", BLOCK, "model = \"o3\"\n\n" BLOCK);
}

static void test_replace_keeps_the_rest(void **state)
{
    (void)state;
    const char *in = "a = 1\n\n" SETUP_TOML_MARKER "\n[mcp_servers.txbox]\ncommand = \"/old\"\n"
                     "\n[mcp_servers.txbox.env]\nX = \"1\"\n\n# theirs\n[profiles.p]\nmodel = \"m\"\n";
    check(in, BLOCK, "a = 1\n\n# theirs\n[profiles.p]\nmodel = \"m\"\n\n" BLOCK);
    check(in, NULL, "a = 1\n\n# theirs\n[profiles.p]\nmodel = \"m\"\n");
    /* a table spelt with quotes and spaces is the same table */
    check("[ mcp_servers . \"txbox\" ]\ncommand = \"x\"\n", NULL, "");
}

static void test_add_then_remove_is_identity(void **state)
{
    (void)state;
    const char *in = "model = \"o3\" # c\n[mcp_servers.other]\ncommand = \"x\"\n";
    int rc;
    char *added = edit(in, BLOCK, &rc);
    assert_int_equal(rc, 0);
    char *again = edit(added, BLOCK, &rc);
    assert_string_equal(again, added);
    char *removed = edit(added, NULL, &rc);
    assert_string_equal(removed, in);
    free(added);
    free(again);
    free(removed);
}

static void test_strings_and_arrays_are_not_headers(void **state)
{
    (void)state;
    const char *in = "s = \"\"\"\n[mcp_servers.txbox]\n\"\"\"\nl = '''\n[mcp_servers.txbox]\n'''\n"
                     "a = [\n  \"[mcp_servers.txbox]\", # ]\n  [1],\n]\nt = { k = \"}\" }\n";
    check(in, NULL, in);
}

static void test_other_forms_are_refused(void **state)
{
    (void)state;
    refused("mcp_servers.txbox.command = \"x\"\n");
    refused("mcp_servers = { txbox = { command = \"x\" } }\n");
    refused("[mcp_servers]\ntxbox = { command = \"x\" }\n");
    refused("[mcp_servers]\ntxbox.command = \"x\"\n");
    refused("[[mcp_servers]]\nname = \"txbox\"\n");
    refused("[mcp_servers.\"tx\\u0062ox\"]\n");
    refused("a = \"no end\n");
    refused("a = [1,\n");
    refused("[mcp_servers.txbox\n");
    refused("a = 1 b = 2\n");
}

static void test_nul_is_refused(void **state)
{
    (void)state;
    char *out = NULL;
    size_t len = 0;
    txbox_error err = {0};
    assert_int_equal(setup_toml_edit("a = 1\n\0", 7, NULL, &out, &len, &err), -1);
    assert_null(out);
}

static void test_toml_string(void **state)
{
    (void)state;
    dbuf b;
    dbuf_init(&b, 0);
    setup_toml_string(&b, "/a b/\"q\"\\\n\x01");
    assert_string_equal(dbuf_str(&b), "\"/a b/\\\"q\\\"\\\\\\u000A\\u0001\"");
    dbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_to_empty_and_to_text),
        cmocka_unit_test(test_replace_keeps_the_rest),
        cmocka_unit_test(test_add_then_remove_is_identity),
        cmocka_unit_test(test_strings_and_arrays_are_not_headers),
        cmocka_unit_test(test_other_forms_are_refused),
        cmocka_unit_test(test_nul_is_refused),
        cmocka_unit_test(test_toml_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
