// Reads one turnstile response in AG-UI 1.0 (stdin: the raw SSE body) the
// way an AG-UI client does, with the official packages: each event is
// validated by `@ag-ui/core`'s `EventSchemas`, then the sequence goes
// through `@ag-ui/client`'s `verifyEvents` (the protocol's ordering rules,
// checked at run time in the reference client). Prints {"events": [types],
// "text", "custom": [{name, value}], "toolCalls": [{id, name, result}],
// "finished": RUN_FINISHED or null, "error": RUN_ERROR or null} as JSON;
// exits 1 with the reason on the first event either refuses.
import { EventSchemas } from "@ag-ui/core/schemas";
import { verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

const raw = await new Response(process.stdin).text();
const events = [];
for (const block of raw.split(/\r?\n\r?\n/)) {
  const data = block
    .split(/\r?\n/)
    .filter((l) => l.startsWith("data:"))
    .map((l) => l.slice(5).replace(/^ /, ""))
    .join("\n");
  if (!data) continue;
  const parsed = EventSchemas.safeParse(JSON.parse(data));
  if (!parsed.success) {
    console.error(`an event does not parse: ${parsed.error.message}\n${data}`);
    process.exit(1);
  }
  events.push(parsed.data);
}
let verified;
try {
  verified = await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
} catch (e) {
  console.error(`the AG-UI client refused the stream: ${e?.message ?? e}`);
  process.exit(1);
}
const out = { events: verified.map((e) => e.type), text: "", custom: [], toolCalls: [], finished: null, error: null };
const calls = new Map();
for (const e of verified) {
  if (e.type === "TEXT_MESSAGE_CONTENT") out.text += e.delta;
  if (e.type === "CUSTOM") out.custom.push({ name: e.name, value: e.value });
  if (e.type === "TOOL_CALL_START") calls.set(e.toolCallId, { id: e.toolCallId, name: e.toolCallName, args: "", result: null });
  if (e.type === "TOOL_CALL_ARGS") calls.get(e.toolCallId).args += e.delta;
  if (e.type === "TOOL_CALL_RESULT") calls.get(e.toolCallId).result = e.content;
  if (e.type === "RUN_FINISHED") out.finished = e;
  if (e.type === "RUN_ERROR") out.error = e;
}
out.toolCalls = [...calls.values()];
process.stdout.write(JSON.stringify(out));
