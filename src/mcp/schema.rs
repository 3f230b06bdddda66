//! The tools' schemas as lean as a model needs them: every agent pays for
//! `tools/list` in its context on every session, so it must stay small
//! (at most [`TOOL_LIST_BUDGET`] bytes). The input schema keeps what a model
//! writes arguments from (each field's type, description, bounds and enum
//! words, with shared definitions inlined); the output schema keeps the
//! shape (its type, or its enum words) of each answer field that is always
//! there, and of an optional one only its enum words: the tool's
//! description names every field and says what it means, once. A lean output schema
//! accepts every answer the full one does, so an SDK that validates results
//! against it (the official ones do) never refuses a real answer.

use serde_json::{Map, Value};

/// The most bytes `tools/list`'s result may take as compact JSON (12 KB,
/// in decimal: what an agent pays in its context each session), with
/// every tool offered.
pub const TOOL_LIST_BUDGET: usize = 12_000;

/// The descriptions of arguments many tools share (`terminal`,
/// `max_bytes`), which the server's instructions say once instead.
const SAID_ONCE: &[&str] = &[
    "Terminal id or name.",
    "Answer bytes at most: 512 to 65536 (64 KiB, the default).",
];

/// A request's schema for a tool's `inputSchema`: shared definitions
/// inlined, and the words a model does not need (`$schema`, titles, number
/// formats, `minimum: 0`, `null` as a type, a `null` or `false` default,
/// `additionalProperties: false`, what the instructions say once) dropped.
pub(super) fn lean_input(schema: Value) -> Map<String, Value> {
    let Value::Object(mut root) = schema else {
        return Map::new();
    };
    let defs = root.remove("$defs").unwrap_or(Value::Null);
    root.remove("$schema");
    root.remove("title");
    root.remove("description");
    // Rules across fields (spawn's `cols` with `rows`) are said in the
    // fields' words; the OpenAPI document keeps them.
    root.remove("allOf");
    let Value::Object(root) = lean_field(Value::Object(root), &defs) else {
        return Map::new();
    };
    with_properties(root)
}

/// An answer's schema for a tool's `outputSchema`: its required fields,
/// each reduced to its shape, and its optional enums.
pub(super) fn lean_output(schema: Value) -> Map<String, Value> {
    let Value::Object(root) = schema else {
        return Map::new();
    };
    let defs = root.get("$defs").cloned().unwrap_or(Value::Null);
    if root.get("type") != Some(&Value::from("object")) {
        // An array (the list's): a newer client takes it as it is.
        let Value::Object(lean) = shape(&Value::Object(root), &defs) else {
            return Map::new();
        };
        return lean;
    }
    let mut lean = Map::new();
    lean.insert("type".to_owned(), Value::from("object"));
    let required = root.get("required").and_then(Value::as_array);
    if let Some(Value::Object(properties)) = root.get("properties") {
        let shapes = properties
            .iter()
            .filter_map(|(name, field)| {
                let mut shape = shape(field, &defs);
                // An answer's schema describes what is serialized: a field
                // it does not require is one left out when absent, never
                // `null`; it stays only when it has words to say (its enum),
                // as the description names every field.
                if !required.is_some_and(|r| r.iter().any(|r| r == name)) {
                    never_null(&mut shape);
                    shape.get("enum")?;
                }
                Some((name.clone(), shape))
            })
            .collect();
        lean.insert("properties".to_owned(), Value::Object(shapes));
    }
    if let Some(required) = root.get("required") {
        lean.insert("required".to_owned(), required.clone());
    }
    with_properties(lean)
}

/// An output schema cut to its required fields' names, for an answer
/// whose full shape another tool's schema gives.
pub(super) fn required_only(schema: &Map<String, Value>) -> Map<String, Value> {
    schema
        .iter()
        .filter(|(key, _)| matches!(key.as_str(), "type" | "required"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .chain([("properties".to_owned(), Value::Object(Map::new()))])
        .collect()
}

/// An object schema always with its `properties` (some clients want them).
fn with_properties(mut object: Map<String, Value>) -> Map<String, Value> {
    if object.get("type") == Some(&Value::from("object")) {
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    object
}

/// The definition a `$ref` names, if it is one of `defs`.
fn resolve<'a>(reference: &Value, defs: &'a Value) -> Option<&'a Value> {
    let name = reference.as_str()?.strip_prefix("#/$defs/")?;
    defs.get(name)
}

/// The string constants of a `oneOf`/`enum`, when that is all it is.
fn words(schema: &Map<String, Value>) -> Option<Vec<Value>> {
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values.iter().all(Value::is_string).then(|| values.clone());
    }
    let Some(Value::Array(variants)) = schema.get("oneOf") else {
        return None;
    };
    variants
        .iter()
        .map(|variant| variant.get("const").filter(|c| c.is_string()).cloned())
        .collect()
}

/// One input field, lean: refs inlined, an optional field's `null`
/// alternative and default dropped, a string enum as `enum`.
fn lean_field(field: Value, defs: &Value) -> Value {
    let Value::Object(mut field) = field else {
        return field;
    };
    if let Some(definition) = field
        .remove("$ref")
        .and_then(|r| resolve(&r, defs).cloned())
    {
        let Value::Object(definition) = lean_field(definition, defs) else {
            return Value::Object(field);
        };
        for (key, value) in definition {
            // The field's own description says more than the type's.
            field.entry(key).or_insert(value);
        }
    }
    if let Some(Value::Array(variants)) = field.remove("anyOf") {
        let mut rest: Vec<Value> = variants
            .into_iter()
            .filter(|variant| variant.get("type") != Some(&Value::from("null")))
            .collect();
        if rest.len() == 1 {
            if let Value::Object(only) = lean_field(rest.remove(0), defs) {
                for (key, value) in only {
                    field.entry(key).or_insert(value);
                }
            }
        } else {
            let rest = rest.into_iter().map(|v| lean_field(v, defs)).collect();
            field.insert("anyOf".to_owned(), Value::Array(rest));
        }
    }
    if let Some(words) = words(&field) {
        field.remove("oneOf");
        field.insert("type".to_owned(), Value::from("string"));
        field.insert("enum".to_owned(), Value::Array(words));
    }
    if let Some(Value::Array(types)) = field.get("type") {
        let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        let single = types.len() == 1;
        let types = if single {
            types[0].clone()
        } else {
            Value::Array(types)
        };
        field.insert("type".to_owned(), types);
    }
    field.remove("format");
    field.remove("title");
    // A name's or a signal's pattern spells out what its description
    // says in words (the OpenAPI document keeps it, for generated
    // clients and schemathesis); a model reads the words.
    field.remove("pattern");
    // Likewise an env name's (no `=`): `propertyNames` is only a pattern.
    field.remove("propertyNames");
    // A command's first word is not empty, the same as every word in
    // words: the description says it (the OpenAPI document keeps both).
    field.remove("prefixItems");
    if field.get("maximum").and_then(Value::as_f64) >= Some(1e9) {
        // A wait's bound (about 31 years) is there for generated clients
        // and schemathesis; no model asks for it.
        field.remove("maximum");
    }
    if field.get("minimum") == Some(&Value::from(0)) {
        // Unsigned: a negative number does not fit the type anyway.
        field.remove("minimum");
    }
    match field.get("description").and_then(Value::as_str) {
        // The server's instructions say it once for every tool.
        // With the bounds it names (`max_bytes`' 512..=65536).
        Some(text) if SAID_ONCE.contains(&text) => {
            for said in ["description", "minimum", "maximum"] {
                field.remove(said);
            }
        }
        // A doc comment's line breaks are spaces to a model.
        Some(text) if text.contains('\n') => {
            let text = text.replace('\n', " ");
            field.insert("description".to_owned(), Value::from(text));
        }
        _ => {}
    }
    // A default that says nothing (`null`, `false`, `0`, `""`): the
    // description states the real default where there is one.
    let empty = |default: &Value| match default {
        Value::Null | Value::Bool(false) => true,
        Value::Number(n) => n.as_u64() == Some(0),
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    if field.get("default").is_some_and(empty) {
        field.remove("default");
    }
    if let Some(Value::Object(properties)) = field.remove("properties") {
        let properties = properties
            .into_iter()
            .map(|(name, value)| (name, lean_field(value, defs)))
            .collect();
        field.insert("properties".to_owned(), Value::Object(properties));
    }
    // A map's value schema stays; `false` goes: an unknown field is
    // refused anyway (invalid params), and saying so costs every tool.
    if let Some(extra @ Value::Object(_)) = field.remove("additionalProperties") {
        field.insert("additionalProperties".to_owned(), lean_field(extra, defs));
    }
    if let Some(items) = field.remove("items") {
        field.insert("items".to_owned(), lean_field(items, defs));
    }
    for key in ["oneOf", "allOf"] {
        if let Some(Value::Array(variants)) = field.remove(key) {
            let variants = variants.into_iter().map(|v| lean_field(v, defs)).collect();
            field.insert(key.to_owned(), Value::Array(variants));
        }
    }
    Value::Object(field)
}

/// The shape without its `null` alternative.
fn never_null(shape: &mut Value) {
    let Some(shape) = shape.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = shape.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            shape.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(mut variants)) = shape.remove("anyOf") {
        variants.retain(|v| v.get("type") != Some(&Value::from("null")));
        if variants.len() == 1 {
            if let Value::Object(only) = variants.remove(0) {
                shape.extend(only);
            }
        } else {
            shape.insert("anyOf".to_owned(), Value::Array(variants));
        }
    }
}

/// An answer field's shape: its JSON type (a plain array item's too), or
/// its enum words, or any value.
fn shape(field: &Value, defs: &Value) -> Value {
    let Some(field) = field.as_object() else {
        return Value::Object(Map::new());
    };
    if let Some(definition) = field.get("$ref").and_then(|r| resolve(r, defs)) {
        return shape(definition, defs);
    }
    let mut lean = Map::new();
    if let Some(words) = words(field) {
        lean.insert("enum".to_owned(), Value::Array(words));
    } else if let Some(kind) = field.get("type") {
        lean.insert("type".to_owned(), kind.clone());
        // An object item's shape (`{"type": "object"}`) says nothing the
        // array does not.
        let items = field.get("items").map(|items| shape(items, defs));
        if let Some(items) = items.filter(|i| i.get("type") != Some(&Value::from("object"))) {
            lean.insert("items".to_owned(), items);
        }
    } else if let Some(Value::Array(variants)) = field.get("oneOf") {
        // A tagged enum (a status): an object whichever variant it is.
        let objects = variants
            .iter()
            .all(|v| v.get("type") == Some(&Value::from("object")));
        if objects {
            lean.insert("type".to_owned(), Value::from("object"));
        }
    } else if let Some(Value::Array(variants)) = field.get("anyOf") {
        // An optional of a type defined once (`Option<Gap>`): its shape or null.
        let shapes: Vec<Value> = variants.iter().map(|v| shape(v, defs)).collect();
        if shapes
            .iter()
            .all(|s| s.get("type").is_some() || s.get("enum").is_some())
        {
            lean.insert("anyOf".to_owned(), Value::Array(shapes));
        }
    }
    Value::Object(lean)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_input_field_is_inlined_and_lean() {
        let schema = json!({
            "$schema": "x", "title": "T", "type": "object",
            "$defs": {"W": {"description": "w", "oneOf": [
                {"const": "a", "type": "string", "description": "A"},
                {"const": "b", "type": "string"}]}},
            "properties": {
                "wait": {"anyOf": [{"$ref": "#/$defs/W"}, {"type": "null"}],
                         "default": null, "description": "when"},
                "n": {"type": ["integer", "null"], "format": "uint", "minimum": 1},
                "terminal": {"type": "string", "description": "Terminal id or name."},
                "m": {"type": "integer", "minimum": 0, "description": "a\nb"}},
            "required": ["n"]});
        let lean = Value::Object(lean_input(schema));
        assert_eq!(
            lean,
            json!({"type": "object", "required": ["n"], "properties": {
                "wait": {"description": "when", "type": "string", "enum": ["a", "b"]},
                "n": {"type": "integer", "minimum": 1},
                "terminal": {"type": "string"},
                "m": {"type": "integer", "description": "a b"}}})
        );
    }

    #[test]
    fn an_output_field_keeps_its_shape() {
        let schema = json!({"type": "object",
            "$defs": {"S": {"oneOf": [{"type": "object"}, {"type": "object"}]},
                      "R": {"oneOf": [{"const": "x"}, {"const": "y"}]}},
            "properties": {
                "status": {"$ref": "#/$defs/S", "description": "d"},
                "reason": {"$ref": "#/$defs/R"},
                "lines": {"type": "array", "items": {"type": "string"}},
                "runs": {"type": "array", "items": {"type": "object", "properties": {}}},
                "gap": {"anyOf": [{"$ref": "#/$defs/R"}, {"type": "null"}]},
                "name": {"type": ["string", "null"], "description": "n"},
                "pid": {"type": ["integer", "null"]}},
            "required": ["status", "runs", "pid"]});
        let lean = Value::Object(lean_output(schema));
        assert_eq!(
            lean,
            json!({"type": "object", "required": ["status", "runs", "pid"], "properties": {
                "status": {"type": "object"},
                "reason": {"enum": ["x", "y"]},
                "runs": {"type": "array"},
                "gap": {"enum": ["x", "y"]},
                "pid": {"type": ["integer", "null"]}}})
        );
    }
}
