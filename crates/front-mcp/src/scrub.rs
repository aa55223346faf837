//! Upstream errors reach callers without the upstream's local paths: a
//! filesystem server's "path outside allowed directories: /etc/passwd not
//! in /srv/files" tells an agent where the files live. In an error reply,
//! or a tool result marked `isError`, every absolute path the caller did not
//! itself name in the call's arguments becomes `<path>`.

use serde_json::Value;

use super::message::Reply;

/// `reply` with the paths in its error text replaced, except `named`.
pub fn scrub_reply(reply: Reply, named: &[String]) -> Reply {
    match reply {
        Reply::Error(mut e) => {
            scrub_strings(&mut e, named);
            Reply::Error(e)
        }
        Reply::Result(mut r) if r.get("isError") == Some(&Value::Bool(true)) => {
            if let Some(content) = r.get_mut("content") {
                scrub_strings(content, named);
            }
            Reply::Result(r)
        }
        other => other,
    }
}

fn scrub_strings(value: &mut Value, named: &[String]) {
    match value {
        Value::String(s) => *s = scrub_text(s, named),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub_strings(v, named)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub_strings(v, named)),
        _ => {}
    }
}

/// Replaces every absolute path in `text` (a `/` at a word start, through
/// the next space, quote or bracket) that is not one of `named`.
pub fn scrub_text(text: &str, named: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        let word_start = at == 0
            || rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_whitespace() || "'\"([{<:=,".contains(c));
        if !word_start {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
            continue;
        }
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || "'\"()[]{}<>,;".contains(c))
            .unwrap_or(tail.len());
        let path = tail[..end].trim_end_matches(['.', ':']);
        if path.len() > 1 && !named.iter().any(|n| n == path) {
            out.push_str("<path>");
        } else {
            out.push_str(path);
        }
        rest = &tail[path.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn local_paths_go_and_the_callers_own_stay() {
        let named = vec!["/etc/passwd".to_owned()];
        assert_eq!(
            scrub_text(
                "Access denied - path outside allowed directories: /etc/passwd not in /srv/files, /home/x",
                &named
            ),
            "Access denied - path outside allowed directories: /etc/passwd not in <path>, <path>"
        );
        assert_eq!(
            scrub_text("ENOENT: '/srv/files/a.txt'.", &[]),
            "ENOENT: '<path>'."
        );
        assert_eq!(scrub_text("ratio 1/2 and a/b", &[]), "ratio 1/2 and a/b");
        assert_eq!(scrub_text("just /", &[]), "just /");
    }

    #[test]
    fn only_errors_are_scrubbed() {
        let ok = Reply::Result(json!({"content": [{"type": "text", "text": "/srv/files/a"}]}));
        assert_eq!(scrub_reply(ok.clone(), &[]), ok);
        let failed = Reply::Result(
            json!({"isError": true, "content": [{"type": "text", "text": "no /srv/x"}]}),
        );
        assert_eq!(
            scrub_reply(failed, &[]),
            Reply::Result(
                json!({"isError": true, "content": [{"type": "text", "text": "no <path>"}]})
            )
        );
        let e = Reply::Error(
            json!({"code": -32603, "message": "EACCES /srv/x", "data": {"at": "/srv"}}),
        );
        assert_eq!(
            scrub_reply(e, &[]),
            Reply::Error(
                json!({"code": -32603, "message": "EACCES <path>", "data": {"at": "<path>"}})
            )
        );
    }
}
