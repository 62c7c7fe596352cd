/* libFuzzer target: the agent's text protocol parser (```run/```undo/
 * ```finish blocks). Corpus: tests/fuzz/corpus/agent_text; replayed by the
 * agent-fuzz-replay meson test. */
#include <stddef.h>
#include <stdint.h>

#include "textproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_fuzz_textproto(data, size);
    return 0;
}
