//! What can be done with a message: open it, open the origin of a retry or dead-letter copy,
//! copy its id or body, page its body, save it as JSON.

use super::app::{App, DetailSource, InputKind, Screen, TerminalRequest};
use crate::engine::store::dispatch::{DLQ_PREFIX, RETRY_PREFIX};
use crate::format::commitlog::prop;

impl App {
    pub fn open_detail(&mut self, offset: u64) {
        if self.screen != Screen::Detail {
            self.detail_history.clear();
        }
        self.detail_offset = Some(offset);
        self.detail_scroll = 0;
        self.detail_source = DetailSource::Elsewhere;
        self.go(Screen::Detail);
    }

    pub(super) fn shown_message(&self) -> Option<u64> {
        match self.screen {
            Screen::Detail => self.detail_offset,
            Screen::Messages => self
                .rows
                .iter()
                .find(|r| r.queue_offset == self.msg_sel)
                .map(|r| r.offset),
            Screen::Results => self
                .result_order()
                .get(self.result_sel)
                .map(|&i| self.results[i]),
            _ => None,
        }
    }

    /// Where a retry or dead-letter copy came from: the offset of the original record.
    pub fn origin_of(&self, offset: u64) -> Result<u64, String> {
        let loc = match self.reader.message_at(offset) {
            Ok(Some(l)) => l,
            _ => return Err("message not readable".into()),
        };
        let m = &loc.message;
        if !m.topic.starts_with(RETRY_PREFIX) && !m.topic.starts_with(DLQ_PREFIX) {
            return Err("o works on a %RETRY% or %DLQ% copy; this message is the original".into());
        }
        let Some(id) = m.property(prop::ORIGIN_MESSAGE_ID) else {
            return Err("the copy has no ORIGIN_MESSAGE_ID property".into());
        };
        // the broker records the original's offset message id; a client may send its UNIQ_KEY
        if let Some(l) = self.reader.by_offset_msg_id(&id) {
            if let Some(r) = l.record {
                return Ok(r.message.position);
            }
        }
        let topic = m.property(prop::RETRY_TOPIC);
        let found = self.reader.by_uniq_key(&id, topic.as_deref(), 64);
        found.offsets.first().copied().ok_or_else(|| {
            format!(
                "the original {id} of {} is no longer in the store",
                topic.as_deref().unwrap_or("its topic")
            )
        })
    }

    /// `o`: open the message a retry or dead-letter copy was made from.
    pub(super) fn open_origin(&mut self) {
        let Some(o) = self.shown_message() else {
            self.status = "open a message first".into();
            return;
        };
        match self.origin_of(o) {
            Ok(origin) => {
                if self.screen == Screen::Detail {
                    self.detail_history.push((o, self.detail_source));
                }
                self.open_detail(origin);
                self.status = format!("origin of the copy at commitlog offset {o}");
            }
            Err(e) => self.status = e,
        }
    }

    /// `c`: the offset message id of the message on the clipboard.
    pub(super) fn copy_id(&mut self) {
        let Some(o) = self.shown_message() else {
            self.status = "select a message first".into();
            return;
        };
        if let Ok(Some((l, _))) = self.reader.message_shown_at(o) {
            let id = l.message.offset_msg_id();
            self.status = format!("copied {id}");
            self.terminal_request = Some(TerminalRequest::Copy(id));
        }
    }

    pub(super) fn body_of(&self, o: u64) -> Option<Vec<u8>> {
        let (l, _) = self.reader.message_shown_at(o).ok()??;
        let m = &l.message;
        Some(
            m.decompressed_body()
                .map(|b| b.into_owned())
                .unwrap_or_else(|_| m.body.to_vec()),
        )
    }

    /// `C`: the body (decompressed) on the clipboard, when it is text.
    pub(super) fn copy_body(&mut self) {
        let Some(body) = self.shown_message().and_then(|o| self.body_of(o)) else {
            self.status = "select a message first".into();
            return;
        };
        match String::from_utf8(body) {
            Ok(text) => {
                self.status = format!("copied the body ({} bytes)", text.len());
                self.terminal_request = Some(TerminalRequest::Copy(text));
            }
            Err(_) => self.status = "the body is binary: p shows it in the pager".into(),
        }
    }

    /// `p`: the body in the pager.
    pub(super) fn page_body(&mut self) {
        match self.shown_message().and_then(|o| self.body_of(o)) {
            Some(body) => self.terminal_request = Some(TerminalRequest::Page(body)),
            None => self.status = "select a message first".into(),
        }
    }

    /// What a key asked the terminal to do, once.
    pub fn take_terminal_request(&mut self) -> Option<TerminalRequest> {
        self.terminal_request.take()
    }

    /// `y`: ask where to save the shown message as JSON, offering a file in the working folder
    /// (or the home folder when the working folder lies in the store).
    pub(super) fn save_prompt(&mut self) {
        let Some(o) = self.detail_offset.filter(|_| self.screen == Screen::Detail) else {
            self.status = "open a message first".into();
            return;
        };
        let name = format!("rmqstore-message-{o}.json");
        let here = std::env::current_dir().unwrap_or_default();
        let dir = match crate::format::layout::ensure_outside_stores(&here.join(&name), "", false) {
            Ok(()) => here,
            Err(_) => std::env::var_os("HOME")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
        };
        self.input = Some((InputKind::SavePath, dir.join(name).display().to_string()));
        self.status = "Enter saves the message to this file, Esc cancels".into();
    }

    /// Save the shown message as JSON to `path`, which must lie outside every store and must
    /// not exist yet.
    pub(super) fn save_message(&mut self, path: &str) {
        let Some(o) = self.detail_offset else {
            return;
        };
        let path = std::path::Path::new(path);
        if path.as_os_str().is_empty() {
            self.status = "cancelled".into();
            return;
        }
        if let Err(e) = crate::format::layout::ensure_outside_stores(path, "the file", false) {
            self.status = format!("not saved: {e}");
            return;
        }
        match self.reader.message_at(o) {
            Ok(Some(loc)) => {
                let j = crate::engine::store::message_json::MessageJson::new(
                    &loc.message,
                    loc.file,
                    crate::engine::store::message_json::BodyMode::Auto,
                );
                let text = serde_json::to_string_pretty(&j).unwrap_or_default();
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
                self.status = match written {
                    Ok(()) => format!("message written to {}", path.display()),
                    Err(e) => format!("not saved: {}: {e}", path.display()),
                };
            }
            _ => self.status = "message not readable".into(),
        }
    }
}
