//! vttest's main-menu tests driven by a tape, every page compared with
//! tmux's own capture of the same pane (`Expect Tmux`): the screen model
//! must render what tmux renders (issue 45). vttest is Debian's, installed
//! by `.ci/run`.

use std::fmt::Write as _;

use super::{assert_passed, run};
use crate::support::{installed, live};

/// The main-menu entries whose pages draw (not the keyboard, reports,
/// VT52, reset or sub-menu ones), how many pages each shows in vttest 2.7
/// (every one ending in "Push <RETURN>"), and the pages where tmux 3.3a
/// itself is not what a VT100 (or xterm) shows, so its capture is no
/// reference: the 132-column passes (tmux keeps 80 columns and, unlike
/// xterm, keeps the scrolling margins across DECCOLM: menu 1 page 2, menu 2
/// pages 7, 9 and 11, menu 8 pages 11 and 12) and the autowrap test mixing
/// printing with BS at the right margin (menu 1 pages 3 and 4: tmux backs
/// up from its pending-wrap column 80 to 79, not 78, and the letter pairs
/// break). The model follows xterm on those; the other 34 pages must be
/// tmux's.
const MENUS: &[(u32, u32, &[u32])] = &[
    (1, 6, &[2, 3, 4]),
    (2, 15, &[7, 9, 11]),
    (3, 1, &[]),
    (4, 6, &[]),
    (8, 14, &[11, 12]),
];

fn vttest_tape(vttest: &str) -> String {
    let mut tape = format!(
        "Set Size 80x24\nSet WaitTimeout 20s\nType \"exec {vttest}\" Enter\n\
         Wait+Screen /Enter choice number/\n"
    );
    for (menu, pages, unlike_vt100) in MENUS {
        let _ = writeln!(tape, "# menu {menu}: {pages} pages\nType \"{menu}\" Enter");
        for page in 1..=*pages {
            // The page is drawn when the output pauses; both sides have the
            // same bytes then, and Expect Tmux waits until they agree.
            let check = if unlike_vt100.contains(&page) {
                "# tmux is no reference here"
            } else {
                "Expect Tmux"
            };
            let _ = writeln!(
                tape,
                "Wait+Screen /Push <RETURN>/ Wait Stable 150ms {check}\nEnter"
            );
        }
        tape.push_str("Wait+Screen /Enter choice number/ Expect Tmux\n");
    }
    tape
}

#[tokio::test]
async fn vttest_pages_render_as_tmux_renders_them() {
    let vttest = installed("vttest").expect("vttest is not installed (.ci/run installs it)");
    live(async |dir| {
        let r = run(dir.path(), "vttest.tape", &vttest_tape(&vttest)).await;
        assert_passed(&r);
    })
    .await;
}
