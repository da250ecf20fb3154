//! Column widths from content: every column gets the width of its widest cell when the screen
//! has room; otherwise a free-text column gives way first (down to its minimum), then the least
//! important columns shrink to their minimum, then are hidden, and a cell that does not fit
//! ends in `…`. A wide screen so shows the short columns whole and cuts only the long text. The selected row's full text is shown
//! elsewhere (the line under the list), so nothing is lost by cutting.

use ratatui::text::Span;

/// One column of a list.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    /// Smallest useful width when it must shrink.
    pub min: u16,
    /// 0 is kept longest; higher numbers shrink and disappear first.
    pub priority: u8,
    /// Free text (a finding's message): shrinks before the other columns, to `min`.
    pub gives_way: bool,
}

impl Column {
    pub const fn new(header: &'static str, min: u16, priority: u8) -> Self {
        Column {
            header,
            min,
            priority,
            gives_way: false,
        }
    }

    /// A free-text column, kept as long as the others but the first to shrink.
    pub const fn text(header: &'static str, min: u16) -> Self {
        Column {
            header,
            min,
            priority: 0,
            gives_way: true,
        }
    }
}

/// Cells between columns.
pub const SPACING: u16 = 1;

/// Display width of a text in terminal cells.
pub fn width_of(s: &str) -> u16 {
    Span::raw(s).width().min(u16::MAX as usize) as u16
}

/// `s` cut to `width` cells, ending in `…` when it was cut.
pub fn cut(s: &str, width: u16) -> String {
    if width_of(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0u16;
    for c in s.chars() {
        let w = if c.is_ascii() {
            1
        } else {
            width_of(c.encode_utf8(&mut [0; 4]))
        };
        if used + w > width - 1 {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// `s` cut to its last `width` cells, starting with `…` when it was cut (a line being typed:
/// its end is where the cursor is).
pub fn cut_front(s: &str, width: u16) -> String {
    if width_of(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0u16;
    for c in s.chars().rev() {
        let w = width_of(c.encode_utf8(&mut [0; 4]));
        if used + w > width - 1 {
            break;
        }
        used += w;
        tail.push(c);
    }
    std::iter::once('…').chain(tail.into_iter().rev()).collect()
}

/// Widths for `columns` holding `rows`, in `available` cells (borders and the selection
/// marker already taken off). A width of 0 hides the column.
pub fn fit<S: AsRef<str>>(columns: &[Column], rows: &[Vec<S>], available: u16) -> Vec<u16> {
    let natural: Vec<u16> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|s| width_of(s.as_ref()))
                .chain([width_of(c.header)])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let total = |w: &[u16]| -> u16 {
        let shown = w.iter().filter(|&&x| x > 0).count() as u16;
        w.iter().sum::<u16>() + SPACING * shown.saturating_sub(1)
    };
    // least important first; free text shrinks before all of them
    let mut hide: Vec<usize> = (0..columns.len()).collect();
    hide.sort_by_key(|&i| (std::cmp::Reverse(columns[i].priority), std::cmp::Reverse(i)));
    let mut shrink = hide.clone();
    shrink.sort_by_key(|&i| !columns[i].gives_way);
    let mut hidden = 0;
    let mut widths = loop {
        let mut widths = natural.clone();
        for &i in &hide[..hidden] {
            widths[i] = 0;
        }
        for &i in &shrink {
            let over = total(&widths).saturating_sub(available);
            if over == 0 {
                break;
            }
            let floor = columns[i].min.min(widths[i]);
            widths[i] = widths[i].saturating_sub(over).max(floor);
        }
        if total(&widths) <= available || hidden + 1 >= hide.len() {
            break widths;
        }
        hidden += 1;
    };
    // the last column takes what is left over
    if let Some(last) = widths.iter().rposition(|&w| w > 0) {
        let t = total(&widths);
        if t < available {
            widths[last] += available - t;
        } else if t > available {
            widths[last] = widths[last].saturating_sub(t - available);
        }
    }
    widths
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [Column; 3] = [
        Column::new("A", 3, 0),
        Column::new("B", 4, 2),
        Column::new("C", 2, 1),
    ];

    #[test]
    fn natural_widths_when_there_is_room() {
        let rows = vec![vec!["aaaa", "bbbbbbbb", "cc"]];
        assert_eq!(fit(&COLS, &rows, 40), vec![4, 8, 2 + 40 - 16]);
    }

    #[test]
    fn least_important_shrinks_then_hides() {
        let rows = vec![vec!["aaaa", "bbbbbbbb", "cccccc"]];
        // 4+8+6+2 = 20; at 16 the B column gives 4
        assert_eq!(fit(&COLS, &rows, 16), vec![4, 4, 6]);
        // at 12, C shrinks to its minimum too
        assert_eq!(fit(&COLS, &rows, 12), vec![4, 4, 2]);
        // at 8, B hides and C takes what is left
        assert_eq!(fit(&COLS, &rows, 8), vec![4, 0, 3]);
    }

    #[test]
    fn free_text_gives_way_before_the_other_columns() {
        let cols = [
            Column::new("CODE", 10, 2),
            Column::new("WHERE", 12, 1),
            Column::text("WHAT", 20),
        ];
        let long = "x".repeat(300);
        let rows = vec![vec![
            "commitlog.crc_mismatch",
            "commitlog/00000000000000000000@51725",
            &long,
        ]];
        // wide: code and file whole, the text takes the rest
        assert_eq!(fit(&cols, &rows, 196), vec![22, 36, 196 - 22 - 36 - 2]);
        // narrow: the text at its minimum, then the others shrink by priority
        assert_eq!(fit(&cols, &rows, 60), vec![10, 28, 20]);
    }

    #[test]
    fn cut_ends_in_an_ellipsis() {
        assert_eq!(cut("2026-11-30 10:15:00.250", 10), "2026-11-3…");
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abc", 0), "");
        assert_eq!(width_of(&cut("日本語テキスト", 5)), 5);
        assert_eq!(cut_front("/var/store/abc", 6), "…e/abc");
        assert_eq!(cut_front("abc", 6), "abc");
        assert_eq!(cut_front("abc", 0), "");
    }
}
