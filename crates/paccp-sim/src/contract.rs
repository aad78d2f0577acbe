//! The engine contract as data: the JSON Schema of the input (derived from the [`crate::config`] types,
//! their serde attributes and doc comments) and of every built-in scheme's parameters. The binding
//! returns it as `paccp._engine.contract_json()`; the documentation site's engine reference
//! (docs/reference/engine.md) is generated from it at every build, so the page cannot drift from the code.
use crate::config::{DropTailCfg, PerVmCfg, Scenario, ShaperCfg, StrictPriorityCfg};
use crate::{cc, host, VERSION};
use schemars::{schema_for, JsonSchema};
use serde_json::{json, Value};

fn schema<T: JsonSchema>() -> Value {
    schema_for!(T).to_value()
}

/// One category of registered schemes: where a scenario names it and each built-in kind's parameters
/// (`null`: no parameter but `kind`).
fn category(fields: &[&str], kinds: Vec<(&str, Value)>) -> Value {
    let kinds: serde_json::Map<String, Value> =
        kinds.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    json!({"fields": fields, "kinds": kinds})
}

/// `{"version", "input": JSON Schema of a scenario, "schemes": {category: {"fields", "kinds"}}}`.
pub fn contract() -> Value {
    json!({
        "version": VERSION,
        "input": schema::<Scenario>(),
        "schemes": {
            "cc": category(&["cc", "flows[].cc"], vec![
                ("reno", schema::<cc::reno::RenoCfg>()),
                ("paccp", schema::<cc::paccp::PaccpCfg>()),
                ("fair_wc", schema::<cc::fair_wc::FairWcCfg>()),
                ("lia", schema::<cc::lia::LiaCfg>()),
                ("olia", schema::<cc::olia::OliaCfg>()),
            ]),
            "qdisc": category(&["queues.host", "queues.switch"], vec![
                ("drop_tail", schema::<DropTailCfg>()),
                ("strict_priority", schema::<StrictPriorityCfg>()),
                ("per_vm", schema::<PerVmCfg>()),
                ("shaper", schema::<ShaperCfg>()),
            ]),
            "selector": category(&["queues.host.selector"], vec![
                ("round_robin", schema::<host::RoundRobinCfg>()),
                ("softbw", schema::<host::softbw::Cfg>()),
                ("elasticswitch", schema::<host::elasticswitch::Cfg>()),
                ("paccp_host", schema::<host::paccp_host::Cfg>()),
            ]),
            "scheduler": category(&["connections[].scheduler"], vec![
                ("least_rtt", Value::Null),
                ("bg_first", Value::Null),
            ]),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;

    fn listed(c: &Value, cat: &str) -> Vec<String> {
        let mut k: Vec<String> = c["schemes"][cat]["kinds"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    }

    fn names<T>(v: &[(String, T)]) -> Vec<String> {
        let mut k: Vec<String> = v.iter().map(|(n, _)| n.clone()).collect();
        k.sort();
        k
    }

    /// Every built-in scheme of the registry is in the contract and nothing else is: a new scheme
    /// without its parameters' schema fails here.
    #[test]
    fn contract_lists_every_registered_scheme() {
        let c = contract();
        let r = Registry::default();
        assert_eq!(listed(&c, "cc"), names(&r.cc));
        assert_eq!(listed(&c, "qdisc"), names(&r.qdiscs));
        assert_eq!(listed(&c, "selector"), names(&r.selectors));
        assert_eq!(listed(&c, "scheduler"), names(&r.schedulers));
    }

    /// Every key a scenario or a scheme takes has a doc comment (the reference page's description):
    /// `kind` tags and one-key variants (`{"packets": N}`, described as a whole) excepted.
    #[test]
    fn every_key_is_documented() {
        fn walk(v: &Value, path: &str, missing: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::Object(props)) = o.get("properties") {
                        let whole = props.len() == 1 && o.contains_key("description");
                        for (k, p) in props {
                            if k != "kind" && !whole && p.get("description").is_none() {
                                missing.push(format!("{path}.{k}"));
                            }
                        }
                    }
                    for (k, x) in o {
                        walk(x, &format!("{path}/{k}"), missing);
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, path, missing)),
                _ => {}
            }
        }
        let mut missing = Vec::new();
        walk(&contract(), "", &mut missing);
        assert!(
            missing.is_empty(),
            "keys without a doc comment: {missing:?}"
        );
    }

    /// The input schema names every top-level key the parser accepts, with serde's defaults.
    #[test]
    fn input_schema_follows_serde() {
        let c = contract();
        let props = &c["input"]["properties"];
        for key in [
            "seed",
            "duration_ns",
            "packet",
            "transport",
            "cc",
            "queues",
            "connections",
        ] {
            assert!(props.get(key).is_some(), "{key} missing");
        }
        let req: Vec<&str> = c["input"]["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert!(req.contains(&"seed") && !req.contains(&"queues"));
        assert_eq!(c["input"]["additionalProperties"], json!(false));
    }
}
