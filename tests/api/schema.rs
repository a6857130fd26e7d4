//! Schema-driven checks of JSON bodies against byre's OpenAPI 3.0.3 contract,
//! `schema/byre.openapi.yaml`.
//!
//! Nothing here lists fields by hand: every check is driven by the spec file. Its
//! `components.schemas` are converted once from OpenAPI 3.0 schema objects to JSON Schema
//! draft 2020-12 and embedded under `$defs` in each compiled validator, with
//! `#/components/schemas/X` refs rewritten to `#/$defs/X`. The conversion:
//! - turns `nullable: true` into `type: [t, "null"]` (adding `null` to any `enum`), or a
//!   type-less schema `s` (e.g. a `$ref`) into `if: {type: null}, else: s`;
//! - drops OpenAPI-only keywords (`nullable`, `discriminator`, `example`, `xml`,
//!   `externalDocs`, `readOnly`, `writeOnly`, `deprecated`, `x-*`) and the OpenAPI-only
//!   formats (`int32`, `int64`, `float`, `double`, `byte`, `binary`, `password`);
//! - turns draft-4 style boolean `exclusiveMinimum`/`exclusiveMaximum` into numbers.
//!
//! Format validation is on, so e.g. a `format: date-time` string must be an RFC 3339
//! timestamp. Objects without `additionalProperties` accept extra properties, as OpenAPI
//! says; `additionalProperties: false` rejects them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{json, Map, Value};

/// Where the contract lives, relative to the crate that compiles this module.
const SPEC_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/byre.openapi.yaml");

/// The keys of a path item that are operations, as OpenAPI 3.0 names them.
const HTTP_METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Keywords that only OpenAPI knows; dropped from the converted schemas.
const OPENAPI_ONLY_KEYWORDS: [&str; 8] = [
    "nullable",
    "discriminator",
    "example",
    "xml",
    "externalDocs",
    "readOnly",
    "writeOnly",
    "deprecated",
];

/// `format` values that only OpenAPI defines; dropped so no validator misreads them.
const OPENAPI_ONLY_FORMATS: [&str; 7] = [
    "int32", "int64", "float", "double", "byte", "binary", "password",
];

/// One operation of the spec, in file order.
#[allow(dead_code)]
struct Operation {
    id: String,
    /// Upper-case HTTP method, e.g. `POST`.
    method: String,
    /// The path template, e.g. `/api/projects/{projectId}/tasks`.
    path: String,
    /// The operation object as JSON (responses, requestBody, ...), still in OpenAPI form.
    spec: Value,
}

/// The contract, loaded once (in a std::sync::OnceLock) from `concat!(env!("CARGO_MANIFEST_DIR"), "/schema/byre.openapi.yaml")`.
#[allow(dead_code)]
pub struct Contract {
    /// The whole spec as JSON, for resolving `$ref`s outside schemas (e.g. `#/components/responses/Error`).
    spec: Value,
    operations: Vec<Operation>,
    /// `components.schemas`, converted to JSON Schema; embedded as `$defs` in every validator.
    defs: Value,
    /// Compiled validators, keyed by what they check (e.g. `getProject 200`, `schema Project`).
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

#[allow(dead_code)]
impl Contract {
    /// The contract, parsed from the spec file on first use. Panics when the file is missing,
    /// is not valid YAML, or repeats an operationId.
    pub fn get() -> &'static Contract {
        static CONTRACT: OnceLock<Contract> = OnceLock::new();
        CONTRACT.get_or_init(|| {
            let text = std::fs::read_to_string(SPEC_PATH)
                .unwrap_or_else(|e| panic!("cannot read the contract {SPEC_PATH}: {e}"));
            Contract::parse(&text).unwrap_or_else(|e| panic!("bad contract {SPEC_PATH}: {e}"))
        })
    }

    /// Parses a spec's YAML text. The YAML value keeps the file's order, so operations are
    /// collected from it before the spec is turned into (unordered) JSON.
    fn parse(text: &str) -> Result<Contract, String> {
        let yaml: serde_norway::Value = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        let mut operations: Vec<Operation> = Vec::new();
        if let Some(paths) = yaml.get("paths").and_then(|p| p.as_mapping()) {
            for (path, item) in paths {
                let path = path.as_str().ok_or("a path key is not a string")?;
                let Some(item) = item.as_mapping() else {
                    continue;
                };
                for (method, op) in item {
                    let Some(method) = method.as_str().filter(|m| HTTP_METHODS.contains(m)) else {
                        continue;
                    };
                    let spec =
                        serde_json::to_value(op).map_err(|e| format!("{method} {path}: {e}"))?;
                    let id = spec["operationId"]
                        .as_str()
                        .ok_or(format!("{method} {path} has no operationId"))?;
                    if operations.iter().any(|o| o.id == id) {
                        return Err(format!("operationId {id} appears more than once"));
                    }
                    let (id, method, path) =
                        (id.to_string(), method.to_uppercase(), path.to_string());
                    operations.push(Operation {
                        id,
                        method,
                        path,
                        spec,
                    });
                }
            }
        }
        let spec = serde_json::to_value(&yaml).map_err(|e| e.to_string())?;
        let mut defs = Map::new();
        if let Some(schemas) = spec
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        {
            for (name, schema) in schemas {
                defs.insert(name.clone(), to_json_schema(schema));
            }
        }
        Ok(Contract {
            spec,
            operations,
            defs: Value::Object(defs),
            validators: Mutex::default(),
        })
    }

    /// Validates `body` against the JSON schema the spec gives operation `operation_id` for response `status`
    /// with content type application/json. Err(message listing every violation with its JSON pointer) when it
    /// does not conform, when the operation is unknown, or when the spec gives that operation no such status
    /// or no application/json body for it.
    ///
    /// The status is looked up as OpenAPI does: the exact code, else its range (`4XX`), else `default`.
    pub fn check_response(
        &self,
        operation_id: &str,
        status: u16,
        body: &Value,
    ) -> Result<(), String> {
        let Some(op) = self.operation(operation_id) else {
            return Err(format!("unknown operation {operation_id}"));
        };
        let keys = [
            status.to_string(),
            format!("{}XX", status / 100),
            "default".into(),
        ];
        let found = keys
            .into_iter()
            .find_map(|k| op.spec["responses"].get(&k).map(|r| (k, r)));
        let Some((key, response)) = found else {
            return Err(format!(
                "the spec gives {operation_id} no response for {status}"
            ));
        };
        let response = self.resolve(response)?;
        let Some(schema) = response.pointer("/content/application~1json/schema") else {
            return Err(format!(
                "the spec gives {operation_id} {key} no application/json body"
            ));
        };
        self.check_fragment(&format!("{operation_id} {key} response"), schema, body)
    }

    /// Validates `value` against `#/components/schemas/{name}`.
    pub fn check_schema(&self, name: &str, value: &Value) -> Result<(), String> {
        if self.defs.get(name).is_none() {
            return Err(format!(
                "the spec has no schema #/components/schemas/{name}"
            ));
        }
        let schema = json!({ "$ref": format!("#/components/schemas/{name}") });
        self.check_fragment(&format!("schema {name}"), &schema, value)
    }

    /// The (method, path template) of an operation, e.g. ("POST", "/api/projects/{projectId}/tasks").
    pub fn route(&self, operation_id: &str) -> Option<(String, String)> {
        self.operation(operation_id)
            .map(|op| (op.method.clone(), op.path.clone()))
    }

    /// The content types of an operation's request body; empty when it takes none.
    pub fn request_types(&self, operation_id: &str) -> Vec<String> {
        self.operation(operation_id)
            .and_then(|op| op.spec.pointer("/requestBody/content"))
            .and_then(Value::as_object)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every operationId in the spec, in file order.
    pub fn operation_ids(&self) -> Vec<String> {
        self.operations.iter().map(|op| op.id.clone()).collect()
    }

    fn operation(&self, operation_id: &str) -> Option<&Operation> {
        self.operations.iter().find(|op| op.id == operation_id)
    }

    /// Follows local `$ref`s (e.g. `#/components/responses/Error`) to the object they name.
    fn resolve<'a>(&'a self, mut value: &'a Value) -> Result<&'a Value, String> {
        for _ in 0..32 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return Ok(value);
            };
            let pointer = reference
                .strip_prefix('#')
                .ok_or_else(|| format!("non-local $ref {reference}"))?;
            value = self
                .spec
                .pointer(pointer)
                .ok_or_else(|| format!("$ref {reference} names nothing"))?;
        }
        Err("$ref chain too long or circular".to_string())
    }

    /// Validates `value` against an OpenAPI schema object from the spec, which may refer to
    /// the components. `label` names the check in messages and keys the validator cache.
    fn check_fragment(&self, label: &str, schema: &Value, value: &Value) -> Result<(), String> {
        let validator = self.validator(label, schema)?;
        let violations: Vec<String> = validator
            .iter_errors(value)
            .map(|e| match e.instance_path().as_str() {
                "" => format!("  (root): {e}"),
                pointer => format!("  {pointer}: {e}"),
            })
            .collect();
        if violations.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{label} does not conform to the contract:\n{}",
            violations.join("\n")
        ))
    }

    /// The compiled validator for `schema`, cached under `label`.
    fn validator(&self, label: &str, schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
        let mut cache = self
            .validators
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(validator) = cache.get(label) {
            return Ok(validator.clone());
        }
        let mut root = match to_json_schema(schema) {
            Value::Object(map) => map,
            other => Map::from_iter([("allOf".to_string(), json!([other]))]),
        };
        root.insert("$defs".to_string(), self.defs.clone());
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&Value::Object(root))
            .map_err(|e| format!("cannot compile the schema for {label}: {e}"))?;
        let validator = Arc::new(validator);
        cache.insert(label.to_string(), validator.clone());
        Ok(validator)
    }
}

/// Converts an OpenAPI 3.0 schema object to a JSON Schema draft 2020-12 one, recursing only
/// through keywords whose values are schemas (so a property named `format` or `example` is kept).
fn to_json_schema(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        let converted = match key.as_str() {
            "$ref" => match value.as_str() {
                Some(r) => Value::String(r.replacen("#/components/schemas/", "#/$defs/", 1)),
                None => value.clone(),
            },
            "properties" | "patternProperties" => match value {
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| (k.clone(), to_json_schema(v)))
                    .collect(),
                _ => value.clone(),
            },
            "items" | "additionalProperties" | "not" => to_json_schema(value),
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(list) => list.iter().map(to_json_schema).collect(),
                _ => value.clone(),
            },
            "format"
                if value
                    .as_str()
                    .is_some_and(|f| OPENAPI_ONLY_FORMATS.contains(&f)) =>
            {
                continue
            }
            "exclusiveMinimum" | "exclusiveMaximum" if value.is_boolean() => continue,
            k if OPENAPI_ONLY_KEYWORDS.contains(&k) || k.starts_with("x-") => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    // Draft 4 style `exclusiveMinimum: true` next to `minimum: n` becomes `exclusiveMinimum: n`.
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if object.get(exclusive) == Some(&Value::Bool(true)) {
            if let Some(n) = out.remove(bound) {
                out.insert(exclusive.to_string(), n);
            }
        }
    }
    if object.get("nullable") == Some(&Value::Bool(true)) {
        match out.get("type").and_then(Value::as_str).map(str::to_string) {
            Some(t) => {
                out.insert("type".to_string(), json!([t, "null"]));
                if let Some(Value::Array(values)) = out.get_mut("enum") {
                    if !values.contains(&Value::Null) {
                        values.push(Value::Null);
                    }
                }
            }
            // Not `anyOf`, whose failures would hide the detail of `out`'s.
            None => return json!({ "if": { "type": "null" }, "else": Value::Object(out) }),
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> Value {
        json!({
            "id": "p1", "name": "byre", "repo_path": "/srv/byre", "default_branch": "main",
            "remote": "origin", "created_by": "ann", "created_at": "2024-05-01T12:00:00Z"
        })
    }

    fn task() -> Value {
        json!({
            "id": "t1", "project_id": "p1", "title": "T", "merge_title": "T", "branch": "byre/t1",
            "worktree_path": "/w/t1", "base_ref": "abc", "port_base": 4000, "color": 2, "status": "active",
            "created_by": "ann", "created_at": "2024-05-01T12:00:00.5+02:00", "state": "idle", "merging": false,
            "discarding": false, "merging_into_parent": false, "merge_after_review": false, "summary_seq": 0
        })
    }

    /// `value` with `key` set to `field`, or removed when `field` is `None`.
    fn edit(mut value: Value, key: &str, field: Option<Value>) -> Value {
        let object = value.as_object_mut().unwrap();
        match field {
            Some(field) => object.insert(key.to_string(), field),
            None => object.remove(key),
        };
        value
    }

    /// Asserts that `result` is an Err whose message mentions each of `needles`.
    fn fails(result: Result<(), String>, needles: &[&str]) {
        let err = result.expect_err("the check passed");
        for needle in needles {
            assert!(err.contains(needle), "{needle:?} is not in: {err}");
        }
    }

    #[test]
    fn valid_bodies_pass_and_extra_properties_are_allowed() {
        let c = Contract::get();
        c.check_schema("Project", &project()).unwrap();
        c.check_schema("Task", &task()).unwrap();
        // Project has no additionalProperties, so extras are allowed.
        let extra = edit(project(), "extra", Some(json!(1)));
        c.check_schema("Project", &extra).unwrap();
    }

    #[test]
    fn missing_wrong_typed_and_non_enum_properties_fail() {
        let c = Contract::get();
        let missing = edit(project(), "created_at", None);
        fails(c.check_schema("Project", &missing), &["created_at"]);
        let wrong = edit(project(), "name", Some(json!(5)));
        fails(c.check_schema("Project", &wrong), &["/name", "string"]);
        let state = edit(task(), "state", Some(json!("flying")));
        fails(c.check_schema("Task", &state), &["/state", "flying"]);
        // Every violation is listed, each with its pointer.
        let both = edit(edit(project(), "remote", None), "name", Some(json!(5)));
        fails(c.check_schema("Project", &both), &["remote", "/name"]);
    }

    #[test]
    fn bad_date_time_fails() {
        let c = Contract::get();
        for bad in [
            "yesterday",
            "2024-05-01",
            "2024-13-01T00:00:00Z",
            "2024-05-01 12:00",
        ] {
            let body = edit(project(), "created_at", Some(json!(bad)));
            fails(
                c.check_schema("Project", &body),
                &["/created_at", "date-time"],
            );
        }
    }

    #[test]
    fn additional_properties_false_rejects_extras() {
        // mergeTask's inline request body is one of the spec's `additionalProperties: false` objects.
        let c = Contract::get();
        let body = &c.operation("mergeTask").unwrap().spec["requestBody"]["content"];
        let schema = &body["application/json"]["schema"];
        assert_eq!(schema["additionalProperties"], json!(false));
        let merge = json!({"merge_title": "Fix", "target": "main"});
        c.check_fragment("mergeTask request", schema, &merge)
            .unwrap();
        let extra = edit(merge, "bogus", Some(json!(1)));
        fails(
            c.check_fragment("mergeTask request", schema, &extra),
            &["bogus"],
        );
    }

    #[test]
    fn responses_are_found_by_status_and_refs_resolved() {
        let c = Contract::get();
        c.check_response("getProject", 200, &project()).unwrap();
        c.check_response("getProject", 404, &json!({"message": "x"}))
            .unwrap();
        fails(
            c.check_response("getProject", 404, &json!({"msg": "x"})),
            &["message"],
        );
        fails(c.check_response("getProject", 418, &json!({})), &["418"]);
        fails(c.check_response("noSuch", 200, &json!({})), &["noSuch"]);
        fails(
            c.check_response("deleteLeadNote", 204, &Value::Null),
            &["no application/json"],
        );
        fails(
            c.check_response("getBlob", 200, &json!("")),
            &["no application/json"],
        );
        fails(
            c.check_schema("NoSuchSchema", &json!({})),
            &["NoSuchSchema"],
        );
    }

    #[test]
    fn array_responses_are_checked_item_by_item() {
        let c = Contract::get();
        c.check_response("listProjects", 200, &json!([project(), project()]))
            .unwrap();
        c.check_response("listProjects", 200, &json!([])).unwrap();
        let bad = json!([project(), edit(project(), "id", Some(json!(7)))]);
        fails(c.check_response("listProjects", 200, &bad), &["/1/id"]);
        fails(
            c.check_response("listProjects", 200, &project()),
            &["array"],
        );
    }

    #[test]
    fn openapi_only_formats_and_keywords_do_not_fail() {
        let c = Contract::get();
        // ClientRequest has format: byte and x-* extensions; Event.seq has format: int64.
        let request = json!({"id": "1", "op": "write_file", "data": "aGk="});
        c.check_schema("ClientRequest", &request).unwrap();
        let event = json!({"seq": i64::MAX, "kind": "k", "actor": "a", "payload": {},
            "created_at": "2024-05-01T12:00:00Z"});
        c.check_schema("Event", &event).unwrap();
        fails(
            c.check_schema("Event", &edit(event, "seq", Some(json!(1.5)))),
            &["/seq"],
        );
    }

    #[test]
    fn nullable_and_boolean_exclusive_bounds_convert() {
        let c = Contract::get();
        let schema = json!({"type": "string", "enum": ["a"], "nullable": true, "example": "a"});
        c.check_fragment("nullable enum", &schema, &Value::Null)
            .unwrap();
        c.check_fragment("nullable enum", &schema, &json!("a"))
            .unwrap();
        fails(
            c.check_fragment("nullable enum", &schema, &json!("b")),
            &["b"],
        );
        let schema = json!({"$ref": "#/components/schemas/Error", "nullable": true});
        c.check_fragment("nullable ref", &schema, &Value::Null)
            .unwrap();
        fails(
            c.check_fragment("nullable ref", &schema, &json!({})),
            &["message"],
        );
        let schema = json!({"type": "string"});
        fails(c.check_fragment("string", &schema, &Value::Null), &["null"]);
        let schema = json!({"type": "integer", "minimum": 1, "exclusiveMinimum": true});
        let converted = json!({"type": "integer", "exclusiveMinimum": 1});
        assert_eq!(to_json_schema(&schema), converted);
        fails(c.check_fragment("exclusive", &schema, &json!(1)), &["1"]);
        c.check_fragment("exclusive", &schema, &json!(2)).unwrap();
    }

    #[test]
    fn every_schema_and_json_response_compiles() {
        let c = Contract::get();
        for name in c.defs.as_object().unwrap().keys() {
            let schema = json!({ "$ref": format!("#/components/schemas/{name}") });
            c.validator(&format!("schema {name}"), &schema).unwrap();
        }
        for op in &c.operations {
            for (status, response) in op.spec["responses"].as_object().unwrap() {
                let response = c.resolve(response).unwrap();
                if let Some(schema) = response.pointer("/content/application~1json/schema") {
                    let label = format!("{} {status} response", op.id);
                    c.validator(&label, schema).unwrap();
                }
            }
        }
    }

    #[test]
    fn routes_and_operation_ids_follow_the_file() {
        let c = Contract::get();
        let (method, path) = c.route("createTask").unwrap();
        assert_eq!(
            (method.as_str(), path.as_str()),
            ("POST", "/api/projects/{projectId}/tasks")
        );
        let (method, path) = c.route("getMe").unwrap();
        assert_eq!((method.as_str(), path.as_str()), ("GET", "/api/me"));
        assert_eq!(c.route("noSuch"), None);
        let ids = c.operation_ids();
        assert_eq!(ids.len(), 64);
        assert_eq!(ids[..3], ["getMe", "updateMe", "updateNotificationPrefs"]);
        assert_eq!(ids.last().unwrap(), "deleteWorkflow");
    }
}
