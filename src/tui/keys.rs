//! The keys: the help screen's table and the one-line hint bar of each screen (only keys that
//! do something there).

use super::app::Screen;
use super::columns::{cut, width_of};

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
        "go to a queue offset or a time: UTC unless written with Z or +08:00, or epoch ms; a \
         time lands where the broker's getOffsetInQueueByTime does: 4.9 the nearest message \
         (which may be stored before the time), 5.x the first stored at or after it",
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
        "copy the message id / the body to the clipboard by OSC 52; tmux drops it by default \
         (set-clipboard external): in tmux, set -g set-clipboard on",
    ),
    ("p", "open the body in $PAGER (less when unset)"),
    (
        "y",
        "save the message as JSON to a file you confirm (never inside the store)",
    ),
    (
        "H r",
        "the health screen: verify runs in the background (H again: run it again); r shows the \
         recovery plan (arrows scroll it)",
    ),
    ("q, Ctrl-C", "quit (the store is never written)"),
];

/// The hint bar of a screen: its entries in order, each with how soon it gives way when the
/// line is too narrow (0: never; higher numbers first).
pub fn hints(screen: Screen) -> &'static [(&'static str, u8)] {
    match screen {
        Screen::Topics => &[
            ("Enter queues", 0),
            ("/ filter", 2),
            ("s sort", 3),
            ("F find", 2),
            ("Tab groups", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Queues => &[
            ("Enter messages", 0),
            ("/ filter", 2),
            ("s sort", 3),
            ("g go to", 2),
            ("F find", 2),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Messages => &[
            ("Enter open", 0),
            ("f filter", 1),
            ("g go to", 1),
            ("n/N next/prev", 3),
            ("/ in page", 3),
            ("F find", 2),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Detail => &[
            ("n/N next/prev", 1),
            ("t view", 1),
            ("o origin", 2),
            ("c/C copy id/body", 2),
            ("p pager", 3),
            ("y save", 3),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Groups => &[
            ("Enter queues", 0),
            ("/ filter", 2),
            ("s sort", 3),
            ("Tab health", 1),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::GroupQueues => &[
            ("Enter open at the offset", 0),
            ("/ filter", 2),
            ("s sort", 3),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Health => &[
            ("Enter jump", 0),
            ("r recovery plan", 1),
            ("H run again", 2),
            ("/ filter", 3),
            ("s sort", 3),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Results => &[
            ("Enter open", 0),
            ("n/N next/prev", 1),
            ("/ filter", 2),
            ("s sort", 3),
            ("Esc back", 1),
            ("? help", 0),
            ("q quit", 4),
        ],
        Screen::Help => &[("arrows scroll", 1), ("Esc back", 0), ("q quit", 0)],
    }
}

/// Cells between two entries of the hint bar.
const GAP: &str = "  ";

/// The hint bar of a screen in `width` cells: whole entries, those that give way first left
/// out until the rest fits (cut with `…` only when even the essential ones do not).
pub fn key_bar(screen: Screen, width: u16) -> String {
    let entries = hints(screen);
    let mut kept: Vec<bool> = vec![true; entries.len()];
    let line = |kept: &[bool]| {
        entries
            .iter()
            .zip(kept)
            .filter(|(_, &k)| k)
            .map(|((e, _), _)| *e)
            .collect::<Vec<_>>()
            .join(GAP)
    };
    // highest rank first, the rightmost of a rank first
    let mut order: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].1 > 0).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(entries[i].1), std::cmp::Reverse(i)));
    for i in order {
        if width_of(&line(&kept)) <= width {
            break;
        }
        kept[i] = false;
    }
    cut(&line(&kept), width)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCREENS: [Screen; 9] = [
        Screen::Topics,
        Screen::Queues,
        Screen::Messages,
        Screen::Detail,
        Screen::Groups,
        Screen::GroupQueues,
        Screen::Health,
        Screen::Results,
        Screen::Help,
    ];

    #[test]
    fn every_key_bar_fits_80_columns_with_whole_entries() {
        for s in SCREENS {
            let bar = key_bar(s, 80);
            assert!(width_of(&bar) <= 80, "{s:?}: {bar}");
            assert!(!bar.contains('…'), "{s:?}: {bar}");
            for part in bar.split(GAP) {
                assert!(
                    hints(s).iter().any(|(e, _)| *e == part),
                    "{s:?}: {part:?} in {bar}"
                );
            }
            if s != Screen::Help {
                assert!(bar.contains("? help"), "{s:?}: {bar}");
            }
        }
    }

    #[test]
    fn a_narrow_bar_drops_whole_entries_and_keeps_help() {
        let bar = key_bar(Screen::Messages, 40);
        assert_eq!(bar, "Enter open  f filter  g go to  ? help");
        let wide = key_bar(Screen::Messages, 200);
        assert!(wide.ends_with("? help  q quit"), "{wide}");
        assert!(key_bar(Screen::Messages, 5).ends_with('…'));
    }
}
