// An MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk),
// for tests/interop_honesty.rs. Serves streamable HTTP (stateful sessions)
// at http://127.0.0.1:<port>/mcp and prints
// "turnstile-ts-interop listening on http://127.0.0.1:<port>/mcp" when ready.
//
// Habits (none of them turnstile's own):
//   * a listing's items are in `structuredContent.results` (not `items`),
//     each with the id field `uid`; no outputSchema is declared;
//   * the accounting is in the result's `_meta` under the standard keys
//     (`returned`, `total` or `total_lower_bound`, `has_more`, `next_cursor`);
//   * the content is a text summary plus one `resource_link` block per item
//     (`name` is the uid);
//   * cursor paging (`cursor` = the previous page's `next_cursor`, an opaque
//     token bound to the search; stateless: it holds an offset);
//   * `uids` narrows to a list of ids, but, like many a search API, a list
//     longer than UIDS_MAX is silently ignored;
//   * the count tool answers a one-key object: `structuredContent:
//     {"count": N}` (and its JSON as the text block);
//   * an in-band failure: `archive: true` answers the text
//     "upstream error 502: Bad Gateway from the photo archive" with
//     isError false, no structuredContent and no _meta;
//   * mutations, `add_photo` and `remove_photo`, so the total (or, with
//     one of each, only the pages' positions) can drift between two turns;
//   * cursors expire (`expire_cursors` ends every cursor issued so far),
//     and an expired cursor is answered in band, like many a search API:
//     a text asking to search again, isError false, no structuredContent
//     and no _meta.
//
// The dataset is the one of py_text_server.py (see there).
//
// Usage: node ts_server.mjs --port 8766

import { randomUUID } from 'node:crypto';
import { createHash } from 'node:crypto';
import http from 'node:http';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const FLOOR_COUNTS = { 1: 240, 2: 613, 3: 651, 4: 198, 5: 87, 6: 45, 7: 24, 8: 3 };
const COUNT_CAP = 500;
const UIDS_MAX = 50;

function pad(n, width) {
  return String(n).padStart(width, '0');
}

function makePhotos() {
  const out = [];
  for (const [f, n] of Object.entries(FLOOR_COUNTS)) {
    const floor = Number(f);
    for (let i = 1; i <= n; i++) {
      const day = new Date(Date.UTC(2026, 0, 1 + ((i * 37 + floor * 11) % 365)));
      out.push({
        uid: `P${pad(floor, 2)}-${pad(i, 4)}`,
        floor,
        captured_at: day.toISOString().slice(0, 10),
      });
    }
  }
  return out;
}

const PHOTOS = makePhotos();
let added = 0;
// Cursors carry the epoch they were issued in; `expire_cursors` moves it.
let epoch = 0;

function matching({ floor, date_from, date_to, uids }) {
  const only = uids && uids.length <= UIDS_MAX ? new Set(uids) : null;
  return PHOTOS.filter(
    (p) =>
      (floor === undefined || p.floor === floor) &&
      (!date_from || p.captured_at >= date_from) &&
      (!date_to || p.captured_at <= date_to) &&
      (only === null || only.has(p.uid)),
  ).sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
}

function searchKey({ floor, date_from, date_to, uids }) {
  const raw = JSON.stringify([floor ?? null, date_from ?? null, date_to ?? null, [...(uids ?? [])].sort()]);
  return createHash('sha256').update(raw).digest('hex').slice(0, 12);
}

const encodeCursor = (offset, key) =>
  Buffer.from(JSON.stringify({ o: offset, k: key, e: epoch })).toString('base64url');

function decodeCursor(cursor, key) {
  let c;
  try {
    c = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    return { error: 'invalid cursor' };
  }
  if (!Number.isInteger(c?.o)) return { error: 'invalid cursor' };
  if (c.k !== key) return { error: 'the cursor belongs to another search' };
  if (c.e !== epoch) return { expired: true };
  return { offset: c.o };
}

const toolError = (text) => ({ isError: true, content: [{ type: 'text', text }] });

const date = z.string().regex(/^\d{4}-\d{2}-\d{2}$/);

function buildServer() {
  const server = new McpServer({ name: 'turnstile-ts-interop', version: '1.0.0' });

  server.registerTool(
    'find_photos',
    {
      description:
        'Find site photos, ordered by uid. Filters: floor, capture date range (YYYY-MM-DD), ' +
        'uids (only these photos). Pages of `limit`; pass `cursor` (the previous page\'s ' +
        'next_cursor) for the next page.',
      inputSchema: {
        floor: z.number().int().optional(),
        date_from: date.optional(),
        date_to: date.optional(),
        uids: z.array(z.string()).optional(),
        limit: z.number().int().min(1).max(100).optional(),
        cursor: z.string().optional(),
        archive: z.boolean().optional().describe('search the cold archive too'),
      },
    },
    async (args) => {
      if (args.archive) {
        // The upstream's failure relayed as if it were an answer.
        return { content: [{ type: 'text', text: 'upstream error 502: Bad Gateway from the photo archive' }] };
      }
      const limit = args.limit ?? 10;
      const key = searchKey(args);
      let offset = 0;
      if (args.cursor) {
        const c = decodeCursor(args.cursor, key);
        if (c.error) return toolError(c.error);
        if (c.expired) {
          return { content: [{ type: 'text', text: 'This search has expired. Please run it again from the start.' }] };
        }
        offset = c.offset;
      }
      const hits = matching(args);
      const page = hits.slice(offset, offset + limit);
      const hasMore = offset + page.length < hits.length;
      const exact = hits.length <= COUNT_CAP;
      const meta = {
        returned: page.length,
        ...(exact ? { total: hits.length } : { total_lower_bound: COUNT_CAP }),
        has_more: hasMore,
        next_cursor: hasMore ? encodeCursor(offset + page.length, key) : null,
      };
      const summary = exact
        ? `${page.length} of ${hits.length} photos`
        : `${page.length} of at least ${COUNT_CAP} photos`;
      return {
        content: [
          { type: 'text', text: summary },
          ...page.map((p) => ({
            type: 'resource_link',
            uri: `photos://site/${p.uid}`,
            name: p.uid,
            mimeType: 'image/jpeg',
            description: `floor ${p.floor}, ${p.captured_at}`,
          })),
        ],
        structuredContent: { results: page },
        _meta: meta,
      };
    },
  );

  server.registerTool(
    'count_photos',
    {
      description: 'Count site photos (floor, capture date range).',
      inputSchema: {
        floor: z.number().int().optional(),
        date_from: date.optional(),
        date_to: date.optional(),
      },
    },
    async (args) => {
      const count = matching({ ...args, uids: undefined }).length;
      return { content: [{ type: 'text', text: JSON.stringify({ count }) }], structuredContent: { count } };
    },
  );

  server.registerTool(
    'add_photo',
    {
      description: 'Record a new photo on a floor.',
      inputSchema: { floor: z.number().int(), captured_at: date },
    },
    async ({ floor, captured_at }) => {
      added += 1;
      // Sorts before the floor's other photos, so it shifts every page.
      const uid = `P${pad(floor, 2)}-0000-${added}`;
      PHOTOS.push({ uid, floor, captured_at });
      return { content: [{ type: 'text', text: `added ${uid}` }] };
    },
  );

  server.registerTool(
    'remove_photo',
    {
      description: 'Delete a photo by uid.',
      inputSchema: { uid: z.string() },
    },
    async ({ uid }) => {
      const at = PHOTOS.findIndex((p) => p.uid === uid);
      if (at < 0) return toolError(`no photo ${uid}`);
      PHOTOS.splice(at, 1);
      return { content: [{ type: 'text', text: `removed ${uid}` }] };
    },
  );

  server.registerTool(
    'expire_cursors',
    {
      description: 'End every cursor issued so far (as a search backend does after a while).',
      inputSchema: {},
    },
    async () => {
      epoch += 1;
      return { content: [{ type: 'text', text: `cursors before epoch ${epoch} expired` }] };
    },
  );

  return server;
}

// ------------------------------------------------------------------ HTTP --

const transports = new Map();

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const text = Buffer.concat(chunks).toString();
  return text ? JSON.parse(text) : undefined;
}

function reply(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname !== '/mcp') return reply(res, 404, 'not found');
  const sid = req.headers['mcp-session-id'];
  if (req.method === 'POST') {
    let body;
    try {
      body = await readJson(req);
    } catch {
      return reply(res, 400, 'Parse error');
    }
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) return reply(res, 404, 'Session not found');
      if (!isInitializeRequest(body)) return reply(res, 400, 'Bad Request: no session');
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && transports.delete(transport.sessionId);
      await buildServer().connect(transport);
    }
    return transport.handleRequest(req, res, body);
  }
  if (req.method === 'GET' || req.method === 'DELETE') {
    const transport = sid && transports.get(sid);
    if (!transport) return reply(res, sid ? 404 : 400, 'Session not found');
    return transport.handleRequest(req, res);
  }
  return reply(res, 405, 'Method not allowed');
}

const args = process.argv.slice(2);
const at = args.indexOf('--port');
const port = at >= 0 ? Number(args[at + 1]) : NaN;
if (!Number.isInteger(port)) {
  console.error('usage: node ts_server.mjs --port PORT');
  process.exit(2);
}
const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error(e);
    if (!res.headersSent) reply(res, 500, 'Internal error');
  });
});
httpServer.listen(port, '127.0.0.1', () => {
  const { port: bound } = httpServer.address();
  console.log(`turnstile-ts-interop listening on http://127.0.0.1:${bound}/mcp`);
});
