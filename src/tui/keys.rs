//! The keys: the help screen's table and the one-line hint bar of each screen (only keys that
//! do something there).

use super::app::Screen;

/// Every key, for the help screen.
pub const HELP: &[(&str, &str)] = &[
    (
        "arrows, hjkl",
        "move; Enter/l opens, Esc/Backspace/h goes back",
    ),
    ("Tab", "topics -> consumer groups -> health"),
    (
        "PgUp PgDn Home End",
        "page through lists and the message view",
    ),
    (
        "/",
        "filter the list as you type (topics, queues, groups, findings, loaded messages)",
    ),
    (
        "s",
        "sort the list by the next column (name, size, lag, time...)",
    ),
    (
        "F",
        "find a message: key, UNIQ_KEY or offset message id (index, scan if none)",
    ),
    (
        "g",
        "go to a queue offset or a time: UTC unless written with Z or +08:00, or epoch ms",
    ),
    (
        "f",
        "filter a queue's messages: TagA || TagB, tag:EXPR, key:K, prop:NAME=VALUE, body:TEXT",
    ),
    (
        "n N",
        "next / previous message (in search results: next / previous result)",
    ),
    (
        "t",
        "body view: text, pretty JSON, hex, raw record with fields marked",
    ),
    (
        "o",
        "on a %RETRY% or %DLQ% copy: open the message it was copied from",
    ),
    (
        "c C",
        "copy the message id / the body to the clipboard (OSC 52 terminals)",
    ),
    ("p", "open the body in $PAGER (less when unset)"),
    (
        "y",
        "save the message as JSON to a file you confirm (never inside the store)",
    ),
    (
        "H r",
        "run verify in the background (health); r shows the recovery plan (arrows scroll it)",
    ),
    ("q, Ctrl-C", "quit (the store is never written)"),
];

/// The hint bar of a screen.
pub fn hints(screen: Screen) -> &'static str {
    match screen {
        Screen::Topics => "Enter queues  / filter  s sort  F find  Tab groups  ? help  q quit",
        Screen::Queues => "Enter messages  / filter  s sort  F find  Esc back  ? help  q quit",
        Screen::Messages => {
            "Enter open  f filter  g go to  n/N next/prev  / in page  F find  Esc back  ?"
        }
        Screen::Detail => {
            "n/N next/prev  t view  o origin  c/C copy id/body  p pager  y save  Esc back"
        }
        Screen::Groups => "Enter queues  / filter  s sort  Tab health  Esc back  ? help  q quit",
        Screen::GroupQueues => {
            "Enter open at the offset  / filter  s sort  Esc back  ? help  q quit"
        }
        Screen::Health => {
            "Enter jump  r recovery plan  H run again  / filter  s sort  Esc back  ? help"
        }
        Screen::Results => "Enter open  n/N next/prev  / filter  s sort  Esc back  ? help",
        Screen::Help => "arrows scroll  Esc back  q quit",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hint_bar_fits_80_columns() {
        use Screen::*;
        for s in [
            Topics,
            Queues,
            Messages,
            Detail,
            Groups,
            GroupQueues,
            Health,
            Results,
            Help,
        ] {
            assert!(hints(s).chars().count() <= 80, "{s:?}: {}", hints(s));
        }
    }
}
