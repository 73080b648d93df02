//! `lockstep explore --coverage`'s report: hits per cell grouped by method and stream state,
//! the reachable cells never hit, and the declarations.

use std::collections::BTreeMap;
use std::fmt;

use super::Hits;
use super::numbers::{self, Number};
use super::space::{Arg, Cell, CellInfo, NOT_CALLED, Relation, Space, StreamState};
use crate::boundary::Class;

/// The coverage of an exploration, judged: it passes when every reachable cell was hit, no
/// cell declared unreachable was hit, and nothing was recorded outside the space.
pub struct Report<'a> {
    hits: &'a Hits,
}

impl<'a> Report<'a> {
    /// Judges `hits` against the coverage space.
    pub fn new(hits: &'a Hits) -> Self {
        Self { hits }
    }

    fn cells(&self) -> impl Iterator<Item = (&'static CellInfo, u64)> + '_ {
        let cells = &Space::get().cells;
        cells
            .iter()
            .enumerate()
            .map(|(i, info)| (info, self.hits.count(i)))
    }

    /// Reachable cells never hit.
    pub fn unhit(&self) -> Vec<Cell> {
        self.cells()
            .filter(|(info, n)| info.excluded.is_none() && *n == 0)
            .map(|(info, _)| info.cell)
            .collect()
    }

    /// Cells declared unreachable that were hit: a wrong declaration.
    pub fn wrongly_declared(&self) -> Vec<(Cell, u64)> {
        self.cells()
            .filter(|(info, n)| info.excluded.is_some() && *n > 0)
            .map(|(info, n)| (info.cell, n))
            .collect()
    }

    /// The numbers' cells with their declarations and hits.
    fn number_cells(&self) -> impl Iterator<Item = (Number, Class, Option<&'static str>, u64)> {
        let hits = self.hits;
        numbers::cells()
            .into_iter()
            .enumerate()
            .map(|(i, (number, class, excluded))| (number, class, excluded, hits.number_count(i)))
    }

    /// Reachable cells of numbers never hit.
    pub fn unhit_numbers(&self) -> Vec<(Number, Class)> {
        self.number_cells()
            .filter(|&(_, _, excluded, n)| excluded.is_none() && n == 0)
            .map(|(number, class, ..)| (number, class))
            .collect()
    }

    /// Cells of numbers declared unreachable that were hit.
    pub fn wrongly_declared_numbers(&self) -> Vec<(Number, Class, u64)> {
        self.number_cells()
            .filter(|&(_, _, excluded, n)| excluded.is_some() && n > 0)
            .map(|(number, class, _, n)| (number, class, n))
            .collect()
    }

    /// Whether every reachable cell was hit, no unreachable one was, and nothing fell outside.
    pub fn passed(&self) -> bool {
        self.unhit().is_empty()
            && self.wrongly_declared().is_empty()
            && self.hits.outside().is_empty()
            && self.unhit_numbers().is_empty()
            && self.wrongly_declared_numbers().is_empty()
    }

    fn write_numbers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cells: Vec<_> = self.number_cells().collect();
        let excluded = cells.iter().filter(|c| c.2.is_some()).count();
        writeln!(
            f,
            "numbers: {} cells: {} reachable ({} hit), {excluded} declared unreachable",
            cells.len(),
            cells.len() - excluded,
            cells.len() - excluded - self.unhit_numbers().len()
        )?;
        for number in Number::ALL {
            let entries: Vec<String> = cells
                .iter()
                .filter(|c| c.0 == number && c.2.is_none())
                .map(|&(_, class, _, n)| format!("{} {n}", class.name()))
                .collect();
            writeln!(f, "  {:<22} {}", number.name(), entries.join(", "))?;
        }
        Ok(())
    }

    fn write_table(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keyed by method, then state in the order of `StreamState::ALL` (idle first).
        let mut lines: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
        for (info, n) in self.cells() {
            if info.excluded.is_some() {
                continue;
            }
            let c = info.cell;
            let entry = match label(c) {
                Some(label) => format!("{label} {n}"),
                None => n.to_string(),
            };
            let state = StreamState::ALL.iter().position(|&s| s == c.state);
            lines
                .entry((c.method as usize, state.expect("a state of ALL")))
                .or_default()
                .push(entry);
        }
        let mut method = None;
        for ((m, state), entries) in lines {
            if method != Some(m) {
                writeln!(f, "{}", super::Method::ALL[m].name())?;
                method = Some(m);
            }
            let state = StreamState::ALL[state].name();
            writeln!(f, "  {state:<10} {}", entries.join(", "))?;
        }
        Ok(())
    }
}

/// The argument class and relation of a cell, as printed; `None` when neither applies.
fn label(c: Cell) -> Option<String> {
    match (c.arg, c.relation) {
        (Arg::Any, Relation::None) => None,
        (arg, Relation::None) => Some(arg.name().to_owned()),
        (Arg::Any, relation) => Some(relation.name().to_owned()),
        (arg, relation) => Some(format!("{}/{}", arg.name(), relation.name())),
    }
}

fn cell_name(c: Cell) -> String {
    let label = label(c).map_or(String::new(), |l| format!(" {l}"));
    format!("{} {}{label}", c.method.name(), c.state.name())
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = Space::get().cells.len();
        let excluded = self.cells().filter(|(i, _)| i.excluded.is_some()).count();
        let unhit = self.unhit();
        writeln!(
            f,
            "coverage: {total} cells: {} reachable ({} hit, {} never hit), {excluded} declared unreachable",
            total - excluded,
            total - excluded - unhit.len(),
            unhit.len()
        )?;
        self.write_table(f)?;
        self.write_numbers(f)?;
        let unhit_numbers = self.unhit_numbers();
        writeln!(f, "never hit ({}):", unhit.len() + unhit_numbers.len())?;
        for c in unhit {
            writeln!(f, "  {}", cell_name(c))?;
        }
        for (number, class) in unhit_numbers {
            writeln!(f, "  {} {}", number.name(), class.name())?;
        }
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for (info, _) in self.cells() {
            if let Some(reason) = info.excluded {
                *reasons.entry(reason).or_default() += 1;
            }
        }
        let mut number_reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for (.., excluded, _) in self.number_cells() {
            if let Some(reason) = excluded {
                *number_reasons.entry(reason).or_default() += 1;
            }
        }
        writeln!(f, "declared unreachable ({excluded} cells):")?;
        for (reason, cells) in reasons {
            writeln!(f, "  {cells} cells: {reason}")?;
        }
        let excluded_numbers: usize = number_reasons.values().sum();
        writeln!(
            f,
            "numbers declared unreachable ({excluded_numbers} cells):"
        )?;
        for (reason, cells) in number_reasons {
            writeln!(f, "  {cells} cells: {reason}")?;
        }
        writeln!(f, "never called:")?;
        for (methods, reason) in NOT_CALLED {
            writeln!(f, "  {methods}: {reason}")?;
        }
        for (c, n) in self.wrongly_declared() {
            writeln!(
                f,
                "DECLARED UNREACHABLE BUT HIT {n} times: {}",
                cell_name(c)
            )?;
        }
        for (number, class, n) in self.wrongly_declared_numbers() {
            writeln!(
                f,
                "DECLARED UNREACHABLE BUT HIT {n} times: {} {}",
                number.name(),
                class.name()
            )?;
        }
        for &c in self.hits.outside() {
            writeln!(f, "RECORDED OUTSIDE THE SPACE: {}", cell_name(c))?;
        }
        Ok(())
    }
}
