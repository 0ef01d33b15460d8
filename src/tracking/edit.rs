//! Setting the config hash (and the config-pending gate) in a workload's YAML as Helm
//! rendered it, by editing lines: comments, key order, quoting and every other byte of the
//! document stay as they were, so `helm get manifest` and the dashboard show the rendered
//! YAML with one annotation more. Only block-style mappings along the template's path
//! are edited; anything else (flow style, JSON, an unusual gate list) is left to the
//! caller, which writes the document as JSON. The edit is checked by parsing it back.

use serde_json::Value;

use super::workload::WorkloadKind;
use super::{CONFIG_HASH_ANNOTATION, CONFIG_PENDING_GATE};
use crate::text::yaml::parse_documents;

/// `body` (one document) with the changes that turned `original` into `updated`, if they
/// are the hash annotation and, at most, adding the config-pending gate to a pod spec
/// without gates; `None` when the text cannot be edited in place.
pub fn edit_workload(
    body: &str,
    kind: WorkloadKind,
    original: &Value,
    updated: &Value,
) -> Option<String> {
    let pointer = kind.template_pointer();
    let hash = updated
        .pointer(&format!("{pointer}/metadata/annotations"))?
        .get(CONFIG_HASH_ANNOTATION)?
        .as_str()?;
    let gates_pointer = format!("{pointer}/spec/schedulingGates");
    let add_gate = match (
        original.pointer(&gates_pointer),
        updated.pointer(&gates_pointer),
    ) {
        (a, b) if a == b => false,
        (None, Some(Value::Array(gates)))
            if gates.len() == 1 && gates[0]["name"] == CONFIG_PENDING_GATE =>
        {
            true
        }
        _ => return None,
    };

    let mut lines: Vec<String> = body.lines().map(str::to_owned).collect();
    let path: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    let root = Block {
        key_line: None,
        indent: 0,
        child_indent: child_indent(&lines, 0, lines.len())?,
    };
    let template = descend(&lines, root, &path)?;
    let step = template.child_indent - template.indent;
    let pad = |n: usize| " ".repeat(n);
    // Edits from the bottom up, so the line numbers found before stay right.
    let spec_gate = if add_gate {
        let spec = find_child(&lines, template, "spec").and_then(|l| block_of(&lines, l))?;
        if find_child(&lines, spec, "schedulingGates").is_some() {
            return None;
        }
        Some((
            end_of(&lines, spec),
            vec![
                format!("{}schedulingGates:", pad(spec.child_indent)),
                format!(
                    "{}- name: {CONFIG_PENDING_GATE}",
                    pad(spec.child_indent + step)
                ),
            ],
        ))
    } else {
        None
    };
    let annotation = |indent: usize| format!("{}{CONFIG_HASH_ANNOTATION}: \"{hash}\"", pad(indent));
    let hash_edit: Edit = match find_child(&lines, template, "metadata") {
        None => Edit::Insert(
            template.key_line? + 1,
            vec![
                format!("{}metadata:", pad(template.child_indent)),
                format!("{}annotations:", pad(template.child_indent + step)),
                annotation(template.child_indent + 2 * step),
            ],
        ),
        Some(m) => {
            let metadata = block_of(&lines, m)?;
            let m_indent = if metadata.child_indent > metadata.indent {
                metadata.child_indent
            } else {
                metadata.indent + step
            };
            match find_child(&lines, metadata, "annotations") {
                None => Edit::Insert(
                    m + 1,
                    vec![
                        format!("{}annotations:", pad(m_indent)),
                        annotation(m_indent + step),
                    ],
                ),
                Some(a) if value_of(&lines[a]) == Some("{}") => Edit::Replace(
                    a,
                    a + 1,
                    vec![
                        format!("{}annotations:", pad(m_indent)),
                        annotation(m_indent + step),
                    ],
                ),
                Some(a) => {
                    let annotations = block_of(&lines, a)?;
                    let a_indent = if annotations.child_indent > annotations.indent {
                        annotations.child_indent
                    } else {
                        annotations.indent + step
                    };
                    match find_child(&lines, annotations, CONFIG_HASH_ANNOTATION) {
                        Some(h) => {
                            let end = end_of_value(&lines, h, a_indent);
                            Edit::Replace(h, end, vec![annotation(a_indent)])
                        }
                        None => {
                            Edit::Insert(end_of(&lines, annotations), vec![annotation(a_indent)])
                        }
                    }
                }
            }
        }
    };
    let mut edits = vec![hash_edit];
    if let Some((at, new)) = spec_gate {
        edits.push(Edit::Insert(at, new));
    }
    edits.sort_by_key(|e| std::cmp::Reverse(e.at()));
    for e in edits {
        match e {
            Edit::Insert(at, new) => {
                lines.splice(at..at, new);
            }
            Edit::Replace(from, to, new) => {
                lines.splice(from..to, new);
            }
        }
    }
    let mut text = lines.join("\n");
    if body.ends_with('\n') {
        text.push('\n');
    }
    // Trust only an edit that reads back as exactly the updated object.
    match <[Value; 1]>::try_from(parse_documents(&text).ok()?) {
        Ok([v]) if v == *updated => Some(text),
        _ => None,
    }
}

enum Edit {
    Insert(usize, Vec<String>),
    Replace(usize, usize, Vec<String>),
}

impl Edit {
    fn at(&self) -> usize {
        match self {
            Self::Insert(at, _) | Self::Replace(at, _, _) => *at,
        }
    }
}

/// A block mapping: the line of its key (none for the document), the key's indent and
/// its entries' indent (equal to `indent` when it has none).
#[derive(Debug, Clone, Copy)]
struct Block {
    key_line: Option<usize>,
    indent: usize,
    child_indent: usize,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Blank or a comment: never ends a block.
fn is_filler(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// The indent of the first entry in lines `from..to`.
fn child_indent(lines: &[String], from: usize, to: usize) -> Option<usize> {
    lines[from..to]
        .iter()
        .find(|l| !is_filler(l))
        .map(|l| indent(l))
}

/// What follows `key:` on its line, comments and spaces dropped; `None` for a block.
fn value_of(line: &str) -> Option<&str> {
    let (_, rest) = line.trim_start().split_once(':')?;
    let rest = match rest.find(" #") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let rest = rest.trim();
    (!rest.is_empty()).then_some(rest)
}

/// The line after the last line of the value of the entry at `line` (indent `indent`).
fn end_of_value(lines: &[String], line: usize, indent_of_entry: usize) -> usize {
    let mut end = line + 1;
    for (i, l) in lines.iter().enumerate().skip(line + 1) {
        if is_filler(l) {
            continue;
        }
        if indent(l) <= indent_of_entry {
            break;
        }
        end = i + 1;
    }
    end
}

/// The line after a block's last entry line.
fn end_of(lines: &[String], block: Block) -> usize {
    match block.key_line {
        Some(k) => end_of_value(lines, k, block.indent),
        None => lines.len(),
    }
}

/// The entry `key` of a block mapping: its line.
fn find_child(lines: &[String], block: Block, key: &str) -> Option<usize> {
    let from = block.key_line.map_or(0, |k| k + 1);
    let to = end_of(lines, block);
    if block.child_indent <= block.indent && block.key_line.is_some() {
        return None;
    }
    (from..to).find(|&i| {
        let l = &lines[i];
        !is_filler(l)
            && indent(l) == block.child_indent
            && l.trim_start()
                .strip_prefix(key)
                .and_then(|r| r.strip_prefix(':'))
                .is_some_and(|r| r.is_empty() || r.starts_with(' '))
    })
}

/// The block mapping that is the value of the entry at `line` (`None` when the value is
/// written on the line itself, other than nothing).
fn block_of(lines: &[String], line: usize) -> Option<Block> {
    if value_of(&lines[line]).is_some() {
        return None;
    }
    let key_indent = indent(&lines[line]);
    let end = end_of_value(lines, line, key_indent);
    let child = child_indent(lines, line + 1, end).unwrap_or(key_indent);
    // A sequence is no mapping.
    let first = lines[line + 1..end].iter().find(|l| !is_filler(l));
    if first.is_some_and(|l| l.trim_start().starts_with('-')) {
        return None;
    }
    Some(Block {
        key_line: Some(line),
        indent: key_indent,
        child_indent: child,
    })
}

fn descend(lines: &[String], mut block: Block, path: &[&str]) -> Option<Block> {
    for key in path {
        let line = find_child(lines, block, key)?;
        block = block_of(lines, line)?;
    }
    Some(block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracking::workload::set_template;

    fn edit(body: &str, kind: WorkloadKind, gate: bool) -> Option<String> {
        let [original] = <[Value; 1]>::try_from(parse_documents(body).unwrap()).unwrap();
        let mut updated = original.clone();
        set_template(kind, &mut updated, "sha256:0123", gate);
        edit_workload(body, kind, &original, &updated)
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # the name\n  labels:\n    app: \"web\"\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: 'web'\n    # pods\n    spec:\n      containers:\n        - name: app\n          image: x\n          env:\n            - name: FLAG\n              value: 'yes'\n";

    #[test]
    fn the_hash_goes_in_and_every_other_line_stays() {
        let out = edit(DEPLOYMENT, WorkloadKind::Deployment, false).unwrap();
        let expected = DEPLOYMENT.replace(
            "    metadata:\n      labels:\n",
            "    metadata:\n      annotations:\n        wheelhouse.dev/config-hash: \"sha256:0123\"\n      labels:\n",
        );
        assert_eq!(out, expected);
        // Idempotent: preparing the prepared text again changes nothing.
        assert_eq!(edit(&out, WorkloadKind::Deployment, false).unwrap(), out);
    }

    #[test]
    fn existing_annotations_keep_their_order_and_an_old_hash_is_replaced() {
        let body = DEPLOYMENT.replace(
            "    metadata:\n      labels:\n",
            "    metadata:\n      annotations:\n        # keep me\n        b: \"2\"\n        wheelhouse.dev/config-hash: old\n        a: '1'\n      labels:\n",
        );
        let out = edit(&body, WorkloadKind::Deployment, false).unwrap();
        assert!(
            out.contains("        # keep me\n        b: \"2\"\n        wheelhouse.dev/config-hash: \"sha256:0123\"\n        a: '1'\n"),
            "{out}"
        );
        let empty = DEPLOYMENT.replace(
            "    metadata:\n      labels:\n",
            "    metadata:\n      annotations: {}\n      labels:\n",
        );
        let out = edit(&empty, WorkloadKind::Deployment, false).unwrap();
        assert!(out.contains("      annotations:\n        wheelhouse.dev/config-hash: \"sha256:0123\"\n      labels:"), "{out}");
    }

    #[test]
    fn no_template_metadata_and_a_gate() {
        let body = DEPLOYMENT.replace("    metadata:\n      labels:\n        app: 'web'\n", "");
        let out = edit(&body, WorkloadKind::Deployment, true).unwrap();
        assert!(
            out.contains("  template:\n    metadata:\n      annotations:\n        wheelhouse.dev/config-hash: \"sha256:0123\"\n    # pods\n"),
            "{out}"
        );
        assert!(
            out.ends_with("              value: 'yes'\n      schedulingGates:\n        - name: wheelhouse.dev/config-pending\n"),
            "{out}"
        );
    }

    #[test]
    fn cronjob_templates_and_flow_style_fallback() {
        let cron = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: c\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: a\n            image: x\n";
        let out = edit(cron, WorkloadKind::CronJob, false).unwrap();
        assert!(out.contains("      template:\n        metadata:\n          annotations:\n            wheelhouse.dev/config-hash: \"sha256:0123\"\n        spec:\n"), "{out}");
        // Flow style or JSON: not edited in place.
        let json = r#"{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"}, "spec": {"template": {"spec": {"containers": []}}}}"#;
        assert_eq!(edit(json, WorkloadKind::Deployment, false), None);
        let flow = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  template: {spec: {containers: []}}\n";
        assert_eq!(edit(flow, WorkloadKind::Deployment, false), None);
    }
}
