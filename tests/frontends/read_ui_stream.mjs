// Reads one turnstile response in the AI SDK's UI message stream format
// (stdin: the raw SSE body) the way `useChat` does, with the official
// package: `parseJsonEventStream` with `uiMessageChunkSchema` (every chunk
// must validate), then `readUIMessageStream` with `terminateOnError` (an
// `error` chunk, or a chunk the client's state machine rejects, throws).
// Prints {"chunks": [...types], "message": <the last UIMessage>} as JSON;
// exits 1 with the reason on the first chunk that does not parse.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const body = await new Response(process.stdin).arrayBuffer();
const raw = new Response(body).body;
const parsed = parseJsonEventStream({ stream: raw, schema: uiMessageChunkSchema });
const types = [];
const chunks = parsed.pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (!result.success) {
        controller.error(new Error(`a chunk does not parse: ${result.error?.message ?? result.error}`));
        return;
      }
      types.push(result.value.type);
      controller.enqueue(result.value);
    },
  }),
);
const expectError = process.argv.includes("--expect-error");
let message;
let error = null;
try {
  for await (const m of readUIMessageStream({ stream: chunks, terminateOnError: true })) {
    message = m;
  }
} catch (e) {
  error = String(e?.message ?? e);
}
if (error && !expectError) {
  console.error(`the UI message stream was refused: ${error}`);
  process.exit(1);
}
process.stdout.write(JSON.stringify({ chunks: types, message, error }));
