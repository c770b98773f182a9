//! Server-side printing through the kube client: `as=Table` gets and lists of a custom resource
//! answer the CRD's printer columns, each cell the first value its JSONPath selects (as the API
//! server prints it), typed by the column; a column that selects nothing prints `null`.

use serde_json::{json, Value};

use crate::support::apiserver::ApiServer;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// A namespaced `Widget` whose v1 prints a list's first port, a map, a count and an absent field.
fn widget_crd() -> Value {
    let column =
        |name: &str, ty: &str, path: &str| json!({"name": name, "type": ty, "jsonPath": path});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [{"name": "v1", "served": true, "storage": true,
            "additionalPrinterColumns": [
                column("Port", "integer", ".spec.ports[*].port"),
                column("Labels", "string", ".spec.labels"),
                column("Count", "integer", ".spec.count"),
                column("Missing", "string", ".status.nothing"),
            ]}]}})
}

async fn get_table(server: &ApiServer, path: &str) -> Value {
    let raw = http::Request::get(path)
        .header("Accept", TABLE)
        .body(Vec::new())
        .unwrap();
    server.client().request::<Value>(raw).await.unwrap()
}

fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect()
}

#[tokio::test]
async fn lists_and_gets_print_the_first_match_of_each_column() {
    let server = ApiServer::start().await;
    server.insert(widget_crd());
    server.insert(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"ports": [{"port": 8080}, {"port": 9090}], "labels": {"a": "b"}, "count": 3}}));

    let list = get_table(&server, "/apis/example.com/v1/namespaces/default/widgets").await;
    assert_eq!(list["kind"], "Table", "{list}");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        column_names(&list),
        ["Name", "Port", "Labels", "Count", "Missing"]
    );
    let rows = list["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(
        rows[0]["cells"],
        json!(["w", 8080, r#"{"a":"b"}"#, 3, null]),
        "the first port only; a map as JSON text; nothing for an absent field"
    );
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "w");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");

    let one = get_table(&server, "/apis/example.com/v1/namespaces/default/widgets/w").await;
    assert_eq!(one["rows"][0]["cells"], rows[0]["cells"]);

    // Without the Table media type the same list is the plain one.
    let raw = http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .body(Vec::new())
        .unwrap();
    let plain: Value = server.client().request(raw).await.unwrap();
    assert_eq!(plain["kind"], "WidgetList");
}

#[tokio::test]
async fn kinds_without_printer_columns_print_name_and_creation() {
    let server = ApiServer::start().await;
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"}, "data": {"k": "v"}}));
    let table = get_table(&server, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(column_names(&table), ["Name", "Created At"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "c");
    assert!(cells[1].is_string(), "{table}");

    // A watch is not rendered as a Table here, and says so.
    let raw = http::Request::get("/api/v1/namespaces/default/configmaps?watch=true")
        .header("Accept", TABLE)
        .body(Vec::new())
        .unwrap();
    match server.client().request_text(raw).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 406),
        other => panic!("expected 406, got {other:?}"),
    }
}
