/* libFuzzer target: the agent's SSE parser, alone and with the chat
 * completion chunk reader on top. Corpus: tests/fuzz/corpus/sse; replayed
 * by the agent-fuzz-replay meson test. */
#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agent_fuzz_sse(data, size);
    agent_fuzz_chat_stream(data, size);
    return 0;
}
