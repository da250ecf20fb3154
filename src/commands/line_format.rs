//! How message streams (`dump commitlog`, `query`, `pull`) are printed: the table, JSON Lines,
//! or one line per message from a `--format` template (kcat's `-f`), `--body-only` being the
//! template `%s\n`.
//!
//! Template tokens: `%t` topic, `%q` queue id, `%o` queue offset, `%O` commitlog offset, `%k`
//! keys (space separated), `%g` tags, `%T` store time (epoch ms), `%B` born time, `%s` body
//! (decompressed, raw bytes), `%S` body length, `%i` offset message id, `%u` UNIQ_KEY, `%H`
//! store host, `%h` properties (`NAME=VALUE` joined by `,`), `%{NAME}` one property, `%%` a
//! percent sign; escapes `\n`, `\t`, `\\`. A missing value prints nothing. Each message ends
//! with a newline unless the template ends with one itself.

use std::sync::Arc;

use crate::format::commitlog::MessageRef;

/// The flags of a message stream's line output, shared by the commands that print messages.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LineArgs {
    /// One line per message from a template, e.g. '%t %q %o %k %T %s' (topic, queue, queue
    /// offset, keys, store time, body; also %O %g %B %S %i %u %H %h %{NAME} %%); the summary
    /// goes to stderr.
    #[arg(long, short = 'f', value_name = "TEMPLATE", conflicts_with_all = ["json", "body_only"])]
    pub format: Option<String>,
    /// Only the bodies (decompressed, as stored bytes), each followed by a newline: the
    /// template '%s\n'. The summary goes to stderr.
    #[arg(long, conflicts_with = "json")]
    pub body_only: bool,
}

/// The shape of a message stream.
#[derive(Debug, Clone)]
pub enum Style {
    Table,
    Json,
    Line(Arc<LineFormat>),
}

impl Style {
    /// The style the flags ask for (clap keeps them exclusive).
    pub fn from_flags(json: bool, lines: &LineArgs) -> anyhow::Result<Self> {
        Ok(match (json, lines.format.as_deref(), lines.body_only) {
            (true, _, _) => Style::Json,
            (_, Some(f), _) => Style::Line(Arc::new(LineFormat::parse(f)?)),
            (_, None, true) => Style::Line(Arc::new(LineFormat::parse("%s\\n")?)),
            _ => Style::Table,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Vec<u8>),
    Topic,
    Queue,
    QueueOffset,
    CommitlogOffset,
    Keys,
    Tags,
    StoreTime,
    BornTime,
    Body,
    BodyLen,
    MsgId,
    UniqKey,
    StoreHost,
    Properties,
    Property(String),
}

/// A parsed `--format` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineFormat {
    parts: Vec<Part>,
}

impl LineFormat {
    pub fn parse(template: &str) -> anyhow::Result<Self> {
        let mut parts = Vec::new();
        let mut text: Vec<u8> = Vec::new();
        let mut chars = template.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => text.push(b'\n'),
                    Some('t') => text.push(b'\t'),
                    Some('\\') => text.push(b'\\'),
                    other => anyhow::bail!(
                        "--format: unknown escape \\{} at character {at} (known: \\n \\t \\\\)",
                        other.map(String::from).unwrap_or_default()
                    ),
                },
                '%' => {
                    let Some((_, t)) = chars.next() else {
                        anyhow::bail!(
                            "--format: a lone % at the end (write %% for a percent sign)"
                        );
                    };
                    let part = match t {
                        '%' => {
                            text.push(b'%');
                            continue;
                        }
                        't' => Part::Topic,
                        'q' => Part::Queue,
                        'o' => Part::QueueOffset,
                        'O' => Part::CommitlogOffset,
                        'k' => Part::Keys,
                        'g' => Part::Tags,
                        'T' => Part::StoreTime,
                        'B' => Part::BornTime,
                        's' => Part::Body,
                        'S' => Part::BodyLen,
                        'i' => Part::MsgId,
                        'u' => Part::UniqKey,
                        'H' => Part::StoreHost,
                        'h' => Part::Properties,
                        '{' => {
                            let mut name = String::new();
                            loop {
                                match chars.next() {
                                    Some((_, '}')) => break,
                                    Some((_, c)) => name.push(c),
                                    None => anyhow::bail!(
                                        "--format: %{{ at character {at} is not closed by }}"
                                    ),
                                }
                            }
                            Part::Property(name)
                        }
                        other => anyhow::bail!(
                            "--format: unknown token %{other} at character {at} (known: %t %q %o \
                             %O %k %g %T %B %s %S %i %u %H %h %{{NAME}} %%)"
                        ),
                    };
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(part);
                }
                c => {
                    let mut b = [0u8; 4];
                    text.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        if !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        parts.push(Part::Text(text));
        Ok(LineFormat { parts })
    }

    /// Append one message to `buf`.
    pub fn render(&self, buf: &mut Vec<u8>, m: &MessageRef<'_>) {
        use std::io::Write;
        for p in &self.parts {
            // writing into a Vec cannot fail
            let _ = match p {
                Part::Text(t) => buf.write_all(t),
                Part::Topic => buf.write_all(m.topic.as_bytes()),
                Part::Queue => write!(buf, "{}", m.queue_id),
                Part::QueueOffset => write!(buf, "{}", m.queue_offset),
                Part::CommitlogOffset => write!(buf, "{}", m.position),
                Part::Keys => buf.write_all(m.keys().join(" ").as_bytes()),
                Part::Tags => buf.write_all(m.tags().unwrap_or_default().as_bytes()),
                Part::StoreTime => write!(buf, "{}", m.store_timestamp),
                Part::BornTime => write!(buf, "{}", m.born_timestamp),
                Part::Body => match m.decompressed_body() {
                    Ok(b) => buf.write_all(&b),
                    Err(_) => buf.write_all(m.body),
                },
                Part::BodyLen => write!(
                    buf,
                    "{}",
                    m.decompressed_body().map_or(m.body.len(), |b| b.len())
                ),
                Part::MsgId => buf.write_all(m.offset_msg_id().as_bytes()),
                Part::UniqKey => buf.write_all(m.uniq_key().unwrap_or_default().as_bytes()),
                Part::StoreHost => write!(buf, "{}", m.store_host),
                Part::Properties => {
                    let all: Vec<String> = m
                        .properties
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    buf.write_all(all.join(",").as_bytes())
                }
                Part::Property(name) => {
                    buf.write_all(m.properties.get(name).unwrap_or_default().as_bytes())
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_bad_ones_say_why() {
        let f = LineFormat::parse("%t %q %o %k %T %s").unwrap();
        assert_eq!(f.parts.len(), 12);
        assert_eq!(f.parts.last(), Some(&Part::Text(b"\n".to_vec())));
        let f = LineFormat::parse("%{traceId}\\t100%%\\n").unwrap();
        assert_eq!(
            f.parts,
            vec![
                Part::Property("traceId".into()),
                Part::Text(b"\t100%\n".to_vec())
            ]
        );
        for (bad, why) in [
            ("%x", "unknown token %x"),
            ("abc%", "a lone %"),
            ("%{open", "not closed"),
            ("\\q", "unknown escape"),
        ] {
            let e = LineFormat::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
