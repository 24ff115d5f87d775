//! `zklock holders LOCK_PATH [--json]`: the holders and the queue, in order.

use std::time::{SystemTime, UNIX_EPOCH};

use zklock::recipes::{lock_queue, QueueEntry};

use crate::args::{Args, Usage};
use crate::{print, Common, Outcome};

pub fn run(mut args: Args) -> Outcome {
    let mut common = match Common::from_env() {
        Ok(common) => common,
        Err(e) => return e.into(),
    };
    let mut json = false;
    let parsed = args.options(|name, value| {
        if common.option(name, value)? {
            return Ok(());
        }
        match name {
            "json" => json = true,
            _ => return Err(Usage(format!("unknown option --{name}"))),
        }
        Ok(())
    });
    if let Err(e) = parsed {
        return e.into();
    }
    let path = match args
        .positional("LOCK_PATH")
        .and_then(|p| args.finish().map(|()| p))
    {
        Ok(p) => p,
        Err(e) => return e.into(),
    };
    let client = match common.client() {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    let queue = match lock_queue(&client, &path) {
        Ok(q) => q,
        Err(e) => return e.into(),
    };
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    if json {
        return print(&format!("{}\n", to_json(&path, &queue, now_ms)));
    }
    if queue.is_empty() {
        return print(&format!("{path}: free\n"));
    }
    let mut text = String::new();
    for entry in &queue {
        text.push_str(&format!(
            "{:<7} {} session={:#x} token={} age={:.1}s {}\n",
            if entry.holds { "holder" } else { "waiting" },
            entry.name,
            entry.session_id,
            entry.fencing_token,
            age_ms(now_ms, entry) as f64 / 1000.0,
            printable(&entry.data)
        ));
    }
    print(&text)
}

fn age_ms(now_ms: i64, entry: &QueueEntry) -> i64 {
    now_ms.saturating_sub(entry.created_ms).max(0)
}

/// The queue as JSON.
fn to_json(path: &str, queue: &[QueueEntry], now_ms: i64) -> String {
    let entries: Vec<String> = queue
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "{{\"position\":{i},\"holds\":{},\"node\":{},\"kind\":{},\"session_id\":\"{:#x}\",\"fencing_token\":{},\"age_ms\":{},\"data\":{}}}",
                e.holds,
                quote(&e.name),
                quote(e.kind.as_str()),
                e.session_id,
                e.fencing_token,
                age_ms(now_ms, e),
                quote(&String::from_utf8_lossy(&e.data)),
            )
        })
        .collect();
    format!(
        "{{\"path\":{},\"queue\":[{}]}}",
        quote(path),
        entries.join(",")
    )
}

/// Node data for a line of text: control characters escaped (`\n`,
/// `\u{1b}`), so that data, which anyone may have written, neither breaks
/// the line nor reaches the terminal as an escape sequence.
pub fn printable(data: &[u8]) -> String {
    printable_cut(data, usize::MAX)
}

/// [`printable`], cut after `max` characters of the data, with how much
/// there was: a line repeated while waiting should not carry a holder's
/// whole data, up to a megabyte (six times that escaped).
pub fn printable_cut(data: &[u8], max: usize) -> String {
    let mut out = String::with_capacity(data.len().min(max));
    for (shown, c) in String::from_utf8_lossy(data).chars().enumerate() {
        if shown == max {
            out.push_str(&format!("... ({} bytes in all)", data.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON string literal.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_and_a_cut_says_how_much_there_was() {
        assert_eq!(printable(b"host\n\x1b[2Jx"), "host\\n\\u{1b}[2Jx");
        assert_eq!(printable_cut(b"abc", 3), "abc");
        assert_eq!(printable_cut(b"abcd", 3), "abc... (4 bytes in all)");
        // Escaped characters count as one each.
        assert_eq!(printable_cut(b"\n\n\nz", 2), "\\n\\n... (4 bytes in all)");
        let megabyte = vec![0x1b; 1 << 20];
        let cut = printable_cut(&megabyte, 200);
        assert_eq!(
            cut.len(),
            200 * "\\u{1b}".len() + "... (1048576 bytes in all)".len()
        );
    }
}
