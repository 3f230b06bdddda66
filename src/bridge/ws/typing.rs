//! Who is typing into a terminal right now, for the page's badge: each
//! viewer that types puts its name on its terminal's board until
//! [`QUIET`](super::burst::QUIET) passes without its input (the pause that
//! ends an audit burst) or it leaves; every viewer of the terminal watches
//! the board and is told the others on it (`{"type":"typing","who":[…]}`)
//! whenever they change. The board of a terminal lives while it has
//! viewers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// Who types into one terminal: a viewer's number and its name.
pub(crate) type Board = BTreeMap<u64, String>;

/// Every terminal's board, by terminal id.
#[derive(Debug, Default)]
pub(crate) struct Typists {
    boards: Mutex<HashMap<String, watch::Sender<Board>>>,
    next: AtomicU64,
}

impl Typists {
    /// A viewer of `terminal` named `name` (its owner, or a share link's
    /// holder), not typing yet.
    pub(crate) fn join(self: &Arc<Self>, terminal: &str, name: String) -> Typist {
        let mut boards = self.boards.lock().unwrap_or_else(PoisonError::into_inner);
        let board = boards
            .entry(terminal.to_owned())
            .or_insert_with(|| watch::channel(Board::new()).0)
            .clone();
        drop(boards);
        Typist {
            typists: Arc::clone(self),
            terminal: terminal.to_owned(),
            id: self.next.fetch_add(1, Ordering::Relaxed),
            name,
            board,
            typing: false,
        }
    }
}

/// One viewer's place on its terminal's board; off it when dropped.
#[derive(Debug)]
pub(crate) struct Typist {
    typists: Arc<Typists>,
    terminal: String,
    id: u64,
    name: String,
    board: watch::Sender<Board>,
    typing: bool,
}

impl Typist {
    /// A watch of the board (changed whenever anyone starts or stops).
    pub(crate) fn watch(&self) -> watch::Receiver<Board> {
        self.board.subscribe()
    }

    /// This viewer typed: on the board, if it was not.
    pub(crate) fn typed(&mut self) {
        if !self.typing {
            self.typing = true;
            self.board.send_modify(|board| {
                board.insert(self.id, self.name.clone());
            });
        }
    }

    /// This viewer stopped typing: off the board.
    pub(crate) fn quiet(&mut self) {
        if self.typing {
            self.typing = false;
            self.board.send_modify(|board| {
                board.remove(&self.id);
            });
        }
    }

    /// Whether this viewer is on the board.
    pub(crate) fn is_typing(&self) -> bool {
        self.typing
    }

    /// The names of the others on `board`, sorted, each once.
    pub(crate) fn others(&self, board: &Board) -> Vec<String> {
        let mut names: Vec<String> = board
            .iter()
            .filter(|(id, _)| **id != self.id)
            .map(|(_, name)| name.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

impl Drop for Typist {
    fn drop(&mut self) {
        self.quiet();
        let mut boards = self
            .typists
            .boards
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Ours and the map's are the last two: no other viewer is left.
        if self.board.sender_count() <= 2 {
            boards.remove(&self.terminal);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_viewer_sees_the_others_typing() {
        let typists = Arc::new(Typists::default());
        let mut alice = typists.join("t", "alice".to_owned());
        let mut guest = typists.join("t", "alice (share link)".to_owned());
        let other = typists.join("u", "bob".to_owned());
        let mut watch = alice.watch();
        alice.typed();
        guest.typed();
        guest.typed();
        assert!(watch.has_changed().unwrap());
        let board = watch.borrow_and_update().clone();
        assert_eq!(alice.others(&board), ["alice (share link)"]);
        assert_eq!(guest.others(&board), ["alice"]);
        assert!(other.others(&other.watch().borrow()).is_empty());
        guest.quiet();
        assert!(alice.others(&watch.borrow_and_update()).is_empty());
        guest.typed();
        drop(guest);
        assert!(alice.others(&watch.borrow_and_update()).is_empty());
        drop(watch);
        drop(alice);
        drop(other);
        assert!(typists.boards.lock().unwrap().is_empty(), "no board kept");
    }
}
