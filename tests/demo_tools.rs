//! The demo server's list tools through the real MCP path: our
//! [`ToolClient`] against [`DemoServer`] over streamable HTTP, no mocks.
//!
//! * `query_data`: NL → SQL with the upstream's injected `LIMIT 3000`; a
//!   listing of all 7,961 tower-a panoramas saturates at 3000 and its last
//!   page says `has_more: false` (the server is confidently wrong), while a
//!   single-value aggregate is exact. Its cursor re-runs the question.
//! * the four faults on `query_data`;
//! * `search_photos` narrowed to April: small enough to be counted exactly.
//! * `get_panorama`: one record (the same data as the search hit it opens),
//!   read-only, an unknown id is a tool error, and the judge reads it as an
//!   answer that is neither a listing nor an aggregate.
//!
//! The numbers asserted here are the contract the scripted planner and the
//! HTTP snapshots rely on.

use crate::common;

use common::init_tracing;
use std::collections::HashSet;

use serde_json::{json, Map, Value};
use turnstile::mcp::{ServerSpec, ToolClient, ToolOutput};
use turnstile_demo::data::{TOWER_A_FLOOR3_SAFETY, TOWER_A_PANORAMAS};
use turnstile_demo::tools::{decode_query_cursor, DRIFT};
use turnstile_demo::{DemoOptions, DemoServer, Fault, INJECTED_ROW_LIMIT};

// ---------------------------------------------------------------- helpers --

/// Panoramas on tower-a floor 3.
const FLOOR3: u64 = 613;
/// Panoramas on tower-a floor 3 captured in April 2026.
const FLOOR3_APRIL: u64 = 81;
/// Panoramas on tower-a floor 3 with a safety annotation, captured in April 2026.
const FLOOR3_SAFETY_APRIL: u64 = 25;

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

async fn demo(faults: Vec<Fault>) -> (DemoServer, ToolClient) {
    init_tracing();
    let server = DemoServer::start(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        DemoOptions {
            faults,
            ..DemoOptions::default()
        },
    )
    .await
    .expect("demo server starts");
    let client = ToolClient::connect(&ServerSpec::http("demo", server.url.clone()))
        .await
        .expect("client connects to demo server");
    (server, client)
}

async fn stop(server: DemoServer, client: ToolClient) {
    client.close().await;
    server.shutdown().await;
}

async fn query(client: &ToolClient, v: Value) -> ToolOutput {
    client
        .call("query_data", args(v))
        .await
        .expect("query_data answers")
}

fn meta(out: &ToolOutput) -> Map<String, Value> {
    out.meta.clone().expect("result-level _meta present")
}

fn structured(out: &ToolOutput) -> Value {
    out.structured.clone().expect("structuredContent present")
}

fn sql(out: &ToolOutput) -> String {
    structured(out)["sql"]
        .as_str()
        .expect("sql is a string")
        .to_string()
}

/// The `id` column of a `query_data` page.
fn row_ids(out: &ToolOutput) -> Vec<String> {
    let s = structured(out);
    let col = s["columns"]
        .as_array()
        .and_then(|c| c.iter().position(|name| name == "id"))
        .expect("an id column");
    s["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r[col].as_str().expect("id is a string").to_string())
        .collect()
}

/// `items[].id` of a `search_photos` page.
fn item_ids(out: &ToolOutput) -> Vec<String> {
    structured(out)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["id"].as_str().expect("id").to_string())
        .collect()
}

/// `(returned, total, has_more, next_cursor is set)` from `_meta`, checked
/// equal to the same keys of `structuredContent`.
fn accounting(out: &ToolOutput) -> (u64, u64, bool, bool) {
    let m = meta(out);
    let s = structured(out);
    for key in ["returned", "total", "has_more", "next_cursor"] {
        assert_eq!(
            Some(&s[key]),
            m.get(key),
            "{key}: _meta == structuredContent"
        );
    }
    (
        m["returned"].as_u64().expect("returned"),
        m["total"].as_u64().expect("an exact-looking total"),
        m["has_more"].as_bool().expect("has_more"),
        m["next_cursor"].is_string(),
    )
}

/// Follow `next_cursor` to the end; returns every page.
async fn all_pages(client: &ToolClient, question: &str, limit: u64) -> Vec<ToolOutput> {
    let mut pages = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut a = json!({"question": question, "limit": limit});
        if !cursor.is_null() {
            a["cursor"] = cursor.clone();
        }
        let page = query(client, a).await;
        assert!(!page.is_error, "{question}: {}", page.text());
        cursor = meta(&page)["next_cursor"].clone();
        pages.push(page);
        if cursor.is_null() {
            return pages;
        }
        assert!(pages.len() < 100, "{question}: runaway paging");
    }
}

// ------------------------------------------------------------- query_data --

#[derive(Debug)]
enum Expect {
    /// A listing's first page (default limit 50).
    Listing {
        total: u64,
        returned: u64,
        has_more: bool,
    },
    /// A single-value aggregate: one row, one column.
    Value { column: &'static str, value: Value },
}

fn check(question: &str, project: Option<&str>, out: &ToolOutput, expect: &Expect) {
    assert!(!out.is_error, "{question}: {}", out.text());
    let s = structured(out);
    let sql = sql(out);
    let (returned, total, has_more, has_cursor) = accounting(out);
    let rows = s["rows"].as_array().expect("rows").clone();
    assert_eq!(rows.len() as u64, returned, "{question}: rows vs returned");
    if let Some(p) = project {
        assert!(sql.contains(&format!("p.project = '{p}'")), "{sql}");
    }
    match expect {
        Expect::Listing {
            total: want_total,
            returned: want_returned,
            has_more: want_more,
        } => {
            assert_eq!(
                (total, returned, has_more, has_cursor),
                (*want_total, *want_returned, *want_more, *want_more),
                "{question}"
            );
            assert!(
                sql.ends_with(&format!(" LIMIT {INJECTED_ROW_LIMIT}")),
                "{question}: {sql}"
            );
            assert_eq!(s["columns"][0], json!("id"), "{question}");
            assert!(
                out.text().starts_with(&format!("Showing {returned} rows")),
                "{question}: {}",
                out.text()
            );
        }
        Expect::Value { column, value } => {
            assert_eq!(
                (total, returned, has_more, has_cursor),
                (1, 1, false, false),
                "{question}"
            );
            assert!(
                !sql.contains("LIMIT"),
                "{question}: aggregates are exempt: {sql}"
            );
            assert_eq!(s["columns"], json!([column]), "{question}");
            assert_eq!(rows[0], json!([value]), "{question}");
            assert!(
                out.text().starts_with("Showing 1 row."),
                "{question}: {}",
                out.text()
            );
        }
    }
}

#[tokio::test]
async fn query_data_cases() {
    let (server, client) = demo(vec![]).await;
    let listing = |total, returned, has_more| Expect::Listing {
        total,
        returned,
        has_more,
    };
    let value = |column, value: Value| Expect::Value { column, value };
    let cases: Vec<(&str, Option<&str>, Expect)> = vec![
        // Saturated: 7,961 panoramas, the SQL's LIMIT 3000 reports 3000.
        ("list all panoramas", None, listing(3000, 50, true)),
        ("list all panoramas", Some("annex"), listing(312, 50, true)),
        (
            "panoramas on floor 3 in April",
            None,
            listing(FLOOR3_APRIL, 50, true),
        ),
        (
            "safety issues on floor 3 from April",
            Some("tower-a"),
            listing(FLOOR3_SAFETY_APRIL, FLOOR3_SAFETY_APRIL, false),
        ),
        ("show photos from 1999", None, listing(0, 0, false)),
        (
            "how many photos are on floor 3?",
            None,
            value("count", json!(FLOOR3)),
        ),
        (
            "how many panoramas are there?",
            None,
            value("count", json!(TOWER_A_PANORAMAS)),
        ),
        (
            "count safety issues on floor 3",
            None,
            value("count", json!(TOWER_A_FLOOR3_SAFETY)),
        ),
        (
            "how many safety issues are on floor 3 in April?",
            None,
            value("count", json!(FLOOR3_SAFETY_APRIL)),
        ),
        (
            "3층 안전 지적사항 몇 건이야?",
            None,
            value("count", json!(TOWER_A_FLOOR3_SAFETY)),
        ),
        (
            "how many photos are there?",
            Some("annex"),
            value("count", json!(312)),
        ),
        ("how many photos from 1999?", None, value("count", json!(0))),
        (
            "earliest photo",
            None,
            value("min_captured_at", json!("2026-01-05")),
        ),
        (
            "latest photo on floor 12",
            None,
            value("max_captured_at", json!("2026-08-28")),
        ),
        (
            "highest floor with safety issues",
            None,
            value("max_floor", json!(12)),
        ),
        (
            "lowest floor with photos",
            None,
            value("min_floor", json!(-1)),
        ),
        (
            "total safety issues on floor 3",
            None,
            value("sum_safety_count", json!(233)),
        ),
    ];
    for (question, project, expect) in &cases {
        let mut a = json!({"question": question});
        if let Some(p) = project {
            a["project"] = json!(p);
        }
        let out = query(&client, a).await;
        check(question, *project, &out, expect);
    }
    // An average is a float, still one exact row.
    let avg = query(
        &client,
        json!({"question": "average annotations per photo on floor 3"}),
    )
    .await;
    assert_eq!(accounting(&avg), (1, 1, false, false));
    let v = structured(&avg)["rows"][0][0].as_f64().expect("a number");
    assert!((v - 715.0 / 613.0).abs() < 1e-9, "{v}");
    assert_eq!(server.query_calls(), cases.len() as u64 + 1);
    assert_eq!(server.search_calls(), 0);
    stop(server, client).await;
}

#[tokio::test]
async fn query_data_rejects_what_it_cannot_translate() {
    let (server, client) = demo(vec![]).await;
    let out = query(&client, json!({"question": "what's the weather like?"})).await;
    assert!(out.is_error);
    assert!(out.meta.is_none() && out.structured.is_none());
    assert!(out.text().contains("could not translate"), "{}", out.text());
    let out = query(
        &client,
        json!({"question": "list all panoramas", "project": "tower-b"}),
    )
    .await;
    assert!(out.is_error && out.text().contains("unknown project"));
    let out = query(
        &client,
        json!({"question": "list all panoramas", "cursor": "not-a-cursor"}),
    )
    .await;
    assert!(out.is_error && out.meta.is_none());
    stop(server, client).await;
}

/// The seed's "confidently wrong" completion: 7,961 panoramas, every page
/// says `total: 3000`, and the last page says `has_more: false`. Only the
/// aggregate knows better.
#[tokio::test]
async fn query_data_saturates_and_its_last_page_says_no_more() {
    let (server, client) = demo(vec![]).await;
    let pages = all_pages(&client, "list all panoramas", 200).await;
    assert_eq!(pages.len(), 15);
    let mut ids = Vec::new();
    for (i, page) in pages.iter().enumerate() {
        let (returned, total, has_more, has_cursor) = accounting(page);
        assert_eq!(
            total, INJECTED_ROW_LIMIT as u64,
            "page {i}: saturated total"
        );
        assert_eq!(returned, 200, "page {i}");
        let last = i + 1 == pages.len();
        assert_eq!((has_more, has_cursor), (!last, !last), "page {i}");
        ids.extend(row_ids(page));
    }
    let last = pages.last().expect("pages");
    assert_eq!(accounting(last), (200, 3000, false, false));
    assert!(last
        .text()
        .starts_with("Showing 200 rows (rows 2801–3000 of 3000)."));
    // Rows are capped at the injected LIMIT, none repeated — and the true
    // population is larger.
    assert_eq!(ids.len(), INJECTED_ROW_LIMIT);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    const { assert!(TOWER_A_PANORAMAS > INJECTED_ROW_LIMIT) };
    // Every page re-ran the question and produced the same SQL.
    let first_sql = sql(&pages[0]);
    assert!(pages.iter().all(|p| sql(p) == first_sql));

    let count = query(
        &client,
        json!({"question": "how many panoramas are there?"}),
    )
    .await;
    assert_eq!(structured(&count)["rows"], json!([[TOWER_A_PANORAMAS]]));

    // limit is clamped to 200; the default is 50.
    let big = query(
        &client,
        json!({"question": "list all panoramas", "limit": 1000}),
    )
    .await;
    assert_eq!(accounting(&big).0, 200);
    let default = query(&client, json!({"question": "list all panoramas"})).await;
    assert_eq!(accounting(&default).0, 50);
    stop(server, client).await;
}

#[tokio::test]
async fn query_data_cursor_follow_through() {
    let (server, client) = demo(vec![]).await;
    let question = "panoramas on floor 3 in April";
    let pages = all_pages(&client, question, 30).await;
    let shape: Vec<(u64, u64, bool, bool)> = pages.iter().map(accounting).collect();
    assert_eq!(
        shape,
        [
            (30, FLOOR3_APRIL, true, true),
            (30, FLOOR3_APRIL, true, true),
            (21, FLOOR3_APRIL, false, false),
        ]
    );
    // No overlap, nothing missing, one SQL.
    let ids: Vec<String> = pages.iter().flat_map(row_ids).collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (81, 81));
    assert!(pages.iter().all(|p| sql(p) == sql(&pages[0])));
    assert!(pages[1]
        .text()
        .starts_with("Showing 30 rows (rows 31–60 of 81)."));

    // The cursor carries the question and an offset, not SQL.
    let first = &pages[0];
    let cursor = meta(first)["next_cursor"]
        .as_str()
        .expect("cursor")
        .to_string();
    let decoded = decode_query_cursor(&cursor).expect("a query_data cursor");
    assert_eq!(
        (
            decoded.offset,
            decoded.question.as_str(),
            decoded.project.as_str()
        ),
        (30, question, "tower-a")
    );
    assert!(!cursor.contains("SELECT"));

    // A cursor is bound to its question (spacing and case aside).
    let same = query(
        &client,
        json!({"question": "  Panoramas on floor 3 in  April", "cursor": cursor, "limit": 30}),
    )
    .await;
    assert_eq!(row_ids(&same), row_ids(&pages[1]));
    let foreign = query(
        &client,
        json!({"question": "list all panoramas", "cursor": cursor}),
    )
    .await;
    assert!(foreign.is_error && foreign.meta.is_none());
    stop(server, client).await;
}

// ----------------------------------------------------- faults on query_data --

#[tokio::test]
async fn query_data_faults() {
    let question = json!({"question": "list all panoramas"});

    for fault in [Fault::Upstream502, Fault::AuthEmptyObject] {
        let (server, client) = demo(vec![fault]).await;
        let out = query(&client, question.clone()).await;
        assert!(!out.is_error, "{fault}: the adapter claims success");
        assert_eq!(out.blocks.len(), 1, "{fault}");
        assert_eq!(out.metas().count(), 0, "{fault}: no _meta anywhere");
        assert!(out.structured.is_none(), "{fault}");
        match fault {
            Fault::Upstream502 => assert!(
                out.text()
                    .starts_with("Search API error: 502 Server Error: Bad Gateway"),
                "{}",
                out.text()
            ),
            _ => assert_eq!(out.text(), "{}"),
        }
        assert_eq!(server.query_calls(), 1);
        stop(server, client).await;
    }

    // cursor-rejected: the first page is fine, any cursor → "invalid cursor".
    let (server, client) = demo(vec![Fault::CursorRejected]).await;
    let first = query(&client, question.clone()).await;
    assert_eq!(accounting(&first), (50, 3000, true, true));
    let mut follow = question.clone();
    follow["cursor"] = meta(&first)["next_cursor"].clone();
    let out = query(&client, follow).await;
    assert!(!out.is_error);
    assert_eq!(out.text(), "invalid cursor");
    assert_eq!(out.metas().count(), 0);
    assert!(out.structured.is_none());
    stop(server, client).await;

    // cursor-drift: the re-run generates different SQL, the total moves by
    // +3 and the next page overlaps the previous one by 3 ids.
    for q in ["list all panoramas", "panoramas on floor 3 in April"] {
        let (server, client) = demo(vec![Fault::CursorDrift]).await;
        let first = query(&client, json!({"question": q})).await;
        let mut follow = json!({"question": q});
        follow["cursor"] = meta(&first)["next_cursor"].clone();
        let second = query(&client, follow).await;
        assert!(!second.is_error, "{q}");
        assert_ne!(sql(&first), sql(&second), "{q}: the SQL drifted");
        let (_, before, _, _) = accounting(&first);
        let (_, after, _, _) = accounting(&second);
        assert_eq!(after - before, DRIFT as u64, "{q}");
        let (a, b) = (row_ids(&first), row_ids(&second));
        let overlap = b.iter().filter(|id| a.contains(id)).count();
        assert_eq!(overlap, DRIFT, "{q}");
        stop(server, client).await;
    }
}

// ------------------------------------------------- search_photos narrowing --

#[tokio::test]
async fn search_photos_narrowed_to_april_is_exact_and_fits_one_page() {
    let (server, client) = demo(vec![]).await;
    let out = client
        .call(
            "search_photos",
            args(json!({
                "query": "safety",
                "floor": 3,
                "date_from": "2026-04-01",
                "date_to": "2026-04-30",
                "limit": 50,
            })),
        )
        .await
        .expect("search_photos");
    assert!(!out.is_error);
    let m = meta(&out);
    assert_eq!(m["total"], json!(FLOOR3_SAFETY_APRIL), "an exact total");
    assert!(!m.contains_key("total_lower_bound"));
    assert_eq!(m["returned"], json!(FLOOR3_SAFETY_APRIL));
    assert_eq!(m["has_more"], json!(false));
    assert_eq!(m["next_cursor"], Value::Null);
    assert_eq!(out.blocks.len() as u64, FLOOR3_SAFETY_APRIL);
    let ids = item_ids(&out);
    assert!(structured(&out)["items"]
        .as_array()
        .expect("items")
        .iter()
        .all(|i| i["floor"] == json!(3)
            && i["captured_at"]
                .as_str()
                .is_some_and(|d| d.starts_with("2026-04-"))));

    // The same population through query_data.
    let listed = query(
        &client,
        json!({"question": "safety issues on floor 3 from April"}),
    )
    .await;
    let a: HashSet<String> = ids.into_iter().collect();
    let b: HashSet<String> = row_ids(&listed).into_iter().collect();
    assert_eq!(a, b);

    // Unnarrowed, it stays a lower bound with more to come.
    let wide = client
        .call(
            "search_photos",
            args(json!({"query": "safety", "floor": 3})),
        )
        .await
        .expect("search_photos");
    let m = meta(&wide);
    assert_eq!(m["total_lower_bound"], json!(189));
    assert!(!m.contains_key("total"));
    assert_eq!(m["has_more"], json!(true));
    stop(server, client).await;
}

#[tokio::test]
async fn tools_list_has_query_data_with_a_cursor() {
    let (server, client) = demo(vec![]).await;
    let tools = client.list_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "archive_query",
            "cancel_action",
            "compile_site_report",
            "confirm_action",
            "confirm_lms_material_export",
            "export_all_lms_materials",
            "get_action",
            "get_panorama",
            "get_photo",
            "list_projects",
            "notify_site_contact",
            "open_permit_portal",
            "prepare_seat_reservation",
            "query_data",
            "search_photos"
        ]
    );
    for (name, required) in [("query_data", "question"), ("search_photos", "query")] {
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        let props = &tool.input_schema["properties"];
        assert!(props["cursor"].is_object(), "{name} has a cursor");
        assert!(props["limit"].is_object(), "{name} has a limit");
        assert!(props["project"].is_object(), "{name} has a project");
        assert_eq!(tool.input_schema["required"], json!([required]), "{name}");
    }
    stop(server, client).await;
}

// ------------------------------------------------------------ get_panorama --

async fn detail(client: &ToolClient, v: Value) -> ToolOutput {
    client
        .call("get_panorama", args(v))
        .await
        .expect("get_panorama answers")
}

/// The full `tools/list` entries (annotations and output schema included),
/// which [`ToolClient`] does not keep: a plain rmcp client over the same
/// streamable HTTP endpoint.
async fn raw_tools(url: &str) -> Vec<rmcp::model::Tool> {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    use rmcp::ServiceExt;
    let running = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("demo-tools-test", "0"),
    )
    .with_protocol_version(turnstile::mcp::PROTOCOL_VERSION)
    .serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
        url.to_string(),
    ))
    .await
    .expect("rmcp client connects");
    let tools = running.peer().list_all_tools().await.expect("tools/list");
    let _ = running.cancel().await;
    tools
}

/// The fields a `get_panorama` record shares with a `search_photos` item.
const SHARED: [&str; 6] = [
    "id",
    "project",
    "floor",
    "captured_at",
    "label",
    "annotations",
];

#[tokio::test]
async fn get_panorama_is_listed_read_only_with_its_schemas() {
    let (server, client) = demo(vec![]).await;
    let tools = client.list_tools().await.expect("tools/list");
    let tool = tools
        .iter()
        .find(|t| t.name == "get_panorama")
        .expect("get_panorama listed");
    let input = &tool.input_schema;
    assert_eq!(input["type"], json!("object"));
    assert_eq!(input["required"], json!(["id"]));
    let props = input["properties"].as_object().expect("properties");
    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["id", "project"], "no cursor, no limit: one record");
    assert!(tool.description.contains("PANO-003-0611"));

    let raw = raw_tools(&server.url).await;
    let raw = raw
        .iter()
        .find(|t| t.name == "get_panorama")
        .expect("get_panorama listed");
    let annotations = raw.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    let output = raw.output_schema.as_ref().expect("an output schema");
    assert_eq!(output.get("type"), Some(&json!("object")));
    let mut out_keys: Vec<&str> = output
        .get("properties")
        .and_then(Value::as_object)
        .expect("output properties")
        .keys()
        .map(String::as_str)
        .collect();
    out_keys.sort_unstable();
    assert_eq!(
        out_keys,
        [
            "annotations",
            "captured_at",
            "description",
            "floor",
            "floor_name",
            "id",
            "label",
            "project",
            "project_name"
        ]
    );
    // The whole entry, pinned: the agent relies on these names.
    let listed = serde_json::to_value(raw).expect("tool as JSON");
    common::snapshot_settings().bind(|| {
        insta::assert_json_snapshot!("get-panorama-tool", listed);
    });
    stop(server, client).await;
}

#[tokio::test]
async fn get_panorama_opens_the_top_search_hit() {
    let (server, client) = demo(vec![]).await;
    let search = client
        .call(
            "search_photos",
            args(json!({"query": "safety", "floor": 3})),
        )
        .await
        .expect("search_photos");
    let items = structured(&search)["items"]
        .as_array()
        .expect("items")
        .clone();
    assert_eq!(items.len(), 10);
    for item in &items {
        let label = item["label"].as_str().expect("label");
        let id = item["id"].as_str().expect("id");
        let by_label = detail(&client, json!({"id": label})).await;
        assert!(!by_label.is_error, "{label}: {}", by_label.text());
        let record = structured(&by_label);
        for key in SHARED {
            assert_eq!(record[key], item[key], "{label}: {key}");
        }
        assert_eq!(
            record["project_name"],
            json!("Tower A (12-storey residential, one basement level)")
        );
        assert_eq!(record["floor_name"], json!("3"));
        // The one text block is the same JSON; no accounting anywhere.
        assert_eq!(by_label.blocks.len(), 1, "{label}");
        let text: Value = serde_json::from_str(&by_label.text()).expect("JSON text block");
        assert_eq!(text, record, "{label}");
        assert_eq!(by_label.metas().count(), 0, "{label}: no _meta");
        // By id, by a lower-cased label, and with the project spelled out:
        // the same record.
        for v in [
            json!({"id": id}),
            json!({"id": label.to_lowercase()}),
            json!({"id": format!(" {label} "), "project": "tower-a"}),
        ] {
            let again = detail(&client, v.clone()).await;
            assert_eq!(again.structured, by_label.structured, "{v}");
        }
    }
    // The README's top hit, pinned.
    let top = detail(&client, json!({"id": "PANO-003-0611"})).await;
    assert_eq!(structured(&top)["label"], items[0]["label"]);
    common::snapshot_settings().bind(|| {
        insta::assert_json_snapshot!("get-panorama-pano-003-0611", structured(&top));
    });
    // A basement label and the annex (labels repeat across projects).
    let b1 = detail(&client, json!({"id": "PANO-B1-0001"})).await;
    assert_eq!(
        (&structured(&b1)["floor"], &structured(&b1)["floor_name"]),
        (&json!(-1), &json!("B1"))
    );
    let annex = detail(&client, json!({"id": "PANO-001-0001", "project": "annex"})).await;
    let tower = detail(&client, json!({"id": "PANO-001-0001"})).await;
    assert_eq!(structured(&annex)["project"], json!("annex"));
    assert_eq!(structured(&tower)["project"], json!("tower-a"));
    assert_ne!(structured(&annex)["id"], structured(&tower)["id"]);
    // A detail call is not a search or a query.
    assert_eq!((server.search_calls(), server.query_calls()), (1, 0));
    stop(server, client).await;
}

#[tokio::test]
async fn get_panorama_unknown_id_is_a_tool_error() {
    let (server, client) = demo(vec![]).await;
    for (v, says) in [
        (
            json!({"id": "PANO-003-9999"}),
            "no panorama 'PANO-003-9999' in project tower-a",
        ),
        (json!({"id": "nope"}), "no panorama 'nope'"),
        (json!({"id": "  "}), "id is empty"),
        // An annex id asked of tower-a: an error that names the project.
        (json!({"id": "AX-00001"}), "project annex has one"),
        (
            json!({"id": "PANO-003-0611", "project": "tower-b"}),
            "unknown project 'tower-b'",
        ),
    ] {
        let out = detail(&client, v.clone()).await;
        assert!(out.is_error, "{v}: isError");
        assert!(out.text().contains(says), "{v}: {}", out.text());
        assert!(out.structured.is_none() && out.metas().count() == 0, "{v}");
    }
    // The error echoes a bounded id.
    let long = "X".repeat(5000);
    let out = detail(&client, json!({"id": long})).await;
    assert!(
        out.is_error && out.text().len() < 200,
        "{}",
        out.text().len()
    );
    // The annex id works with its project.
    let ok = detail(&client, json!({"id": "AX-00001", "project": "annex"})).await;
    assert!(!ok.is_error);
    stop(server, client).await;
}

#[tokio::test]
async fn get_panorama_faults_are_the_list_tools_faults() {
    let id = json!({"id": "PANO-003-0611"});
    for fault in [Fault::Upstream502, Fault::AuthEmptyObject] {
        let (server, client) = demo(vec![fault]).await;
        let out = detail(&client, id.clone()).await;
        assert!(!out.is_error, "{fault}: the adapter claims success");
        assert_eq!(out.blocks.len(), 1, "{fault}");
        assert!(
            out.structured.is_none() && out.metas().count() == 0,
            "{fault}"
        );
        match fault {
            Fault::Upstream502 => assert!(
                out.text()
                    .starts_with("Search API error: 502 Server Error: Bad Gateway"),
                "{}",
                out.text()
            ),
            _ => assert_eq!(out.text(), "{}"),
        }
        stop(server, client).await;
    }
    // The cursor faults need a cursor; a detail call has none.
    let (server, client) = demo(vec![]).await;
    let clean = detail(&client, id.clone()).await;
    stop(server, client).await;
    for fault in [Fault::CursorRejected, Fault::CursorDrift] {
        let (server, client) = demo(vec![fault]).await;
        let out = detail(&client, id.clone()).await;
        assert_eq!(out, clean, "{fault}");
        stop(server, client).await;
    }
}

/// How the judge classifies a detail result, with the demo's contracts: an
/// answer (not an in-band failure), ONE record — not a listing to count, not
/// a single-value aggregate, never "none".
#[tokio::test]
async fn get_panorama_is_judged_one_record() {
    use turnstile::judge::emptiness::{read_result_emptiness, Emptiness};
    use turnstile::judge::in_band::{self, AnswerVerdict};
    use turnstile::judge::result::Reading;
    use turnstile::judge::{grade, CountGrade};

    let contracts = turnstile_demo::contracts();
    let contract = contracts.get("get_panorama");
    assert_eq!(
        contract.map(|c| (c.fixed_prefixes.is_empty(), c.stitch)),
        Some((true, false)),
        "a contract without prefix or stitching"
    );

    let (server, client) = demo(vec![]).await;
    let out = detail(&client, json!({"id": "PANO-003-0611"})).await;
    let reading = Reading::of(&out, contract);
    let (verdict, marks) = in_band::judge(contract, &reading, &out);
    assert_eq!(verdict, AnswerVerdict::Answer);
    assert!(marks.accounting_or_structured && !marks.structure && !marks.fixed_prefix);
    assert_eq!(reading.aggregate, None, "not an aggregate");
    assert_eq!(reading.items, None, "not a listing");
    assert!(!reading.has_structure());
    assert_eq!(reading.accounting, None, "nothing to count");
    assert_eq!(
        grade(None, 0, INJECTED_ROW_LIMIT as u64).grade,
        CountGrade::Unknown
    );
    assert_eq!(
        read_result_emptiness(contract, &reading, &out),
        Emptiness::Unknown,
        "never \"none\""
    );
    let record = reading.record.expect("one record");
    assert_eq!(record.get("label"), Some(&json!("PANO-003-0611")));

    // An unknown id: a tool error, no record, and no statement about absence.
    let missing = detail(&client, json!({"id": "PANO-003-9999"})).await;
    assert!(missing.is_error);
    let missing_reading = Reading::of(&missing, contract);
    assert!(missing_reading.record.is_none());
    assert_eq!(
        read_result_emptiness(contract, &missing_reading, &missing),
        Emptiness::Unknown
    );
    stop(server, client).await;

    // A relayed upstream failure is an in-band failure, thanks to the contract.
    for fault in [Fault::Upstream502, Fault::AuthEmptyObject] {
        let (server, client) = demo(vec![fault]).await;
        let out = detail(&client, json!({"id": "PANO-003-0611"})).await;
        let reading = Reading::of(&out, contract);
        assert_eq!(
            in_band::judge(contract, &reading, &out).0,
            AnswerVerdict::InBandFailure,
            "{fault}"
        );
        assert!(reading.record.is_none(), "{fault}");
        assert_eq!(
            read_result_emptiness(contract, &reading, &out),
            Emptiness::Unknown,
            "{fault}"
        );
        stop(server, client).await;
    }
}
