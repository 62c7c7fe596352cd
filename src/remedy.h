/* The words for a remedy (txbox_remedy, include/txbox.h): lib/ states the
 * fact and names what can be done about it; the fronts say it. These are
 * the CLI's words, which every front uses today: the MCP server and the
 * agent loop relay what `txbox ... --json` says (a child's, or for a run in
 * their own process resident.c's, in these words), and docs/usage.md
 * quotes them. A front that words a remedy otherwise (an MCP tool instead
 * of a command) adds its own voice here. */
#ifndef TXBOX_REMEDY_H
#define TXBOX_REMEDY_H

#include <stddef.h>

#include "txbox.h"

/* Room for an error's message with its remedy's words. */
#define REMEDY_TEXT_MAX (sizeof(((txbox_error *)0)->msg) + 128)

/* r's words (" (run 'txbox recover')"), in buf; "" for TXBOX_REMEDY_NONE. */
const char *remedy_words(const txbox_remedy *r, char *buf, size_t n);
/* text with r's words put in at r->at (the end, when past it); malloc'd. */
char *remedy_apply(const char *text, const txbox_remedy *r);
/* err's message with its remedy's words, in buf (REMEDY_TEXT_MAX). */
const char *remedy_error_text(const txbox_error *err, char *buf, size_t n);

#endif
