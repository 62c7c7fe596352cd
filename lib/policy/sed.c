/* sed scripts: what a script does besides editing the stream it prints.
 *
 * Read the way GNU sed compiles a script (sed/compile.c): commands
 * separated by newlines, ';' and braces; addresses (N, $, first~step,
 * /re/ and \cREc with their I/M flags, addr,+N, addr,~N) and '!'; the
 * argument of each command: a label (: b t T v), text to the end of the
 * line (a i c, with backslash-newline continuations), a file name to the
 * end of the line (r R w W, s///w), a command to the end of the line (e),
 * the delimited parts of s and y (any delimiter but newline and backslash;
 * a backslash escapes the next character; in a regex a bracket expression
 * is skipped whole, as GNU sed 4.9 does: s/[/]/x/) and the flags of s (e
 * runs the pattern space, w writes).
 *
 * Whatever the reader does not know makes the whole script not understood:
 * it never reports less than sed would do. */
#include <ctype.h>

#include "pol.h"

typedef struct sedp {
    const char *s;
    size_t n, i;
    sed_effect *out;
    size_t max, nout;
    bool bad;
} sedp;

static int peek(const sedp *p) { return p->i < p->n ? (unsigned char)p->s[p->i] : EOF; }
static int next(sedp *p) { return p->i < p->n ? (unsigned char)p->s[p->i++] : EOF; }

static void skip_blanks(sedp *p)
{
    while (peek(p) == ' ' || peek(p) == '\t')
        p->i++;
}

static void effect(sedp *p, int kind, size_t from, size_t to)
{
    if (p->nout >= p->max) {
        p->bad = true; /* more than the caller can look at */
        return;
    }
    p->out[p->nout++] = (sed_effect){.kind = kind, .arg = p->s + from, .len = to - from};
}

/* The rest of the line (a file name or a command), after leading blanks. */
static void rest_of_line(sedp *p, size_t *from, size_t *to)
{
    skip_blanks(p);
    *from = p->i;
    while (peek(p) != EOF && peek(p) != '\n')
        p->i++;
    *to = p->i;
}

/* A bracket expression after its '[' (as GNU sed 4.9 skips it in a regex:
 * the delimiter does not end it, a backslash is itself, [:class:], [.x.]
 * and [=x=] inside); false when unterminated. */
static bool bracket(sedp *p)
{
    if (peek(p) == '^')
        p->i++;
    if (peek(p) == ']')
        p->i++;
    for (;;) {
        int ch = next(p);
        if (ch == EOF || ch == '\n')
            return false;
        if (ch == ']')
            return true;
        if (ch == '[' && (peek(p) == ':' || peek(p) == '.' || peek(p) == '=')) {
            int kind = next(p);
            for (;;) {
                int c2 = next(p);
                if (c2 == EOF || c2 == '\n')
                    return false;
                if (c2 == kind && peek(p) == ']') {
                    p->i++;
                    break;
                }
            }
        }
    }
}

/* One delimited part of s, y or an address regex; false when unterminated. */
static bool delimited(sedp *p, int delim, bool regex)
{
    for (;;) {
        int ch = next(p);
        if (ch == EOF || ch == '\n')
            return false;
        if (ch == delim)
            return true;
        if (ch == '\\' && next(p) == EOF)
            return false;
        if (ch == '[' && regex && !bracket(p))
            return false;
    }
}

static void number(sedp *p)
{
    while (isdigit(peek(p)))
        p->i++;
}

/* One address; false when there is none here. */
static bool address(sedp *p)
{
    int ch = peek(p);
    if (ch == '/' || ch == '\\') {
        p->i++;
        int delim = ch == '/' ? '/' : next(p);
        if (delim == EOF || delim == '\n' || delim == '\\' || !delimited(p, delim, true)) {
            p->bad = true;
            return false;
        }
        while (peek(p) == 'I' || peek(p) == 'M')
            p->i++;
        return true;
    }
    if (isdigit(ch)) {
        number(p);
        if (peek(p) == '~') {
            p->i++;
            number(p);
        }
        return true;
    }
    if (ch == '$') {
        p->i++;
        return true;
    }
    return false;
}

static void addresses(sedp *p)
{
    if (!address(p) || p->bad)
        return;
    skip_blanks(p);
    if (peek(p) != ',')
        return;
    p->i++;
    skip_blanks(p);
    if (peek(p) == '+' || peek(p) == '~') {
        p->i++;
        if (!isdigit(peek(p)))
            p->bad = true;
        number(p);
    } else if (!address(p)) {
        p->bad = true;
    }
}

/* After a command: blanks, then the end of it (; newline # } or the end). */
static void end_of_command(sedp *p)
{
    skip_blanks(p);
    int ch = peek(p);
    if (ch == ';' || ch == '\n')
        p->i++;
    else if (ch != EOF && ch != '#' && ch != '}')
        p->bad = true;
}

/* a, i, c: one-line text (GNU) or backslash-newline text, to an unescaped newline */
static void text(sedp *p)
{
    skip_blanks(p);
    if (peek(p) == '\\') {
        p->i++;
        skip_blanks(p);
        if (peek(p) == '\n')
            p->i++;
    }
    for (;;) {
        int ch = next(p);
        if (ch == EOF || ch == '\n')
            return;
        if (ch == '\\' && next(p) == EOF)
            return;
    }
}

/* :label, b, t, T, v: a label ends at a blank, ';', a newline or '}' */
static void label(sedp *p)
{
    skip_blanks(p);
    while (peek(p) != EOF && peek(p) != '\n' && peek(p) != ';' && peek(p) != ' ' && peek(p) != '\t' &&
           peek(p) != '}')
        p->i++;
}

static void subst_flags(sedp *p)
{
    for (;;) {
        int ch = peek(p);
        if (ch == 'g' || ch == 'p' || ch == 'i' || ch == 'I' || ch == 'm' || ch == 'M' || isdigit(ch)) {
            p->i++;
        } else if (ch == 'e') {
            p->i++;
            effect(p, SED_EXEC, 0, 0); /* runs the pattern space */
        } else if (ch == 'w') {
            p->i++;
            size_t a, b;
            rest_of_line(p, &a, &b);
            effect(p, SED_WRITE, a, b);
            return;
        } else {
            end_of_command(p);
            return;
        }
    }
}

static void command(sedp *p, int *depth)
{
    int ch = next(p);
    size_t a, b;
    switch (ch) {
    case '#':
        while (peek(p) != EOF && peek(p) != '\n')
            p->i++;
        return;
    case '{':
        (*depth)++;
        return;
    case '}':
        if (--*depth < 0)
            p->bad = true;
        end_of_command(p);
        return;
    case ':':
    case 'b':
    case 't':
    case 'T':
    case 'v':
        label(p);
        end_of_command(p);
        return;
    case '=':
    case 'd':
    case 'D':
    case 'g':
    case 'G':
    case 'h':
    case 'H':
    case 'n':
    case 'N':
    case 'p':
    case 'P':
    case 'x':
    case 'z':
    case 'F':
        end_of_command(p);
        return;
    case 'l':
    case 'L':
    case 'q':
    case 'Q':
        skip_blanks(p);
        number(p);
        end_of_command(p);
        return;
    case 'a':
    case 'i':
    case 'c':
        text(p);
        return;
    case 'e':
        rest_of_line(p, &a, &b);
        effect(p, SED_EXEC, a, b); /* empty: runs the pattern space */
        return;
    case 'r':
    case 'R':
        rest_of_line(p, &a, &b);
        effect(p, SED_READ, a, b);
        return;
    case 'w':
    case 'W':
        rest_of_line(p, &a, &b);
        effect(p, SED_WRITE, a, b);
        return;
    case 's':
    case 'y': {
        int delim = next(p);
        if (delim == EOF || delim == '\n' || delim == '\\' || !delimited(p, delim, ch == 's') ||
            !delimited(p, delim, false)) {
            p->bad = true;
            return;
        }
        if (ch == 's')
            subst_flags(p);
        else
            end_of_command(p);
        return;
    }
    default:
        p->bad = true; /* not a command this reader knows */
    }
}

int sed_effects(const char *s, size_t n, sed_effect *out, size_t max)
{
    sedp p = {.s = s, .n = n, .out = out, .max = max};
    int depth = 0;
    while (!p.bad) {
        while (peek(&p) == ';' || isspace(peek(&p)))
            p.i++;
        if (peek(&p) == EOF)
            break;
        addresses(&p);
        if (p.bad)
            break;
        skip_blanks(&p);
        while (peek(&p) == '!') {
            p.i++;
            skip_blanks(&p);
        }
        if (peek(&p) == EOF || peek(&p) == '\n' || peek(&p) == ';') {
            p.bad = true; /* an address without a command */
            break;
        }
        command(&p, &depth);
    }
    return p.bad ? -1 : (int)p.nout;
}
