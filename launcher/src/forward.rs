//! A child's output, forwarded line by line with its rank's prefix.

use std::io::{self, BufRead, BufReader, Read, Write};

/// The longest line forwarded whole: a longer one (a progress bar redrawn with `\r`, binary
/// output) goes out in pieces of this many bytes, each a line of its own, so a rank that never
/// writes a newline costs the launcher this much memory, not all it wrote.
pub const LINE_BYTES_MAX: u64 = 64 << 10;

/// Copies `from` to `to` a line at a time, each line after `prefix`; a last line without a
/// newline gets one, as does each piece of a line longer than 64 KiB (`LINE_BYTES_MAX`). Each
/// line is one `write_all` under `to`'s lock, so lines of different ranks never interleave
/// within a line.
///
/// # Errors
/// A read or write failure (the launcher's own output closed, say).
pub fn forward_lines<W: Write>(
    from: impl Read,
    prefix: &str,
    to: &std::sync::Mutex<W>,
) -> io::Result<()> {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut reader)
            .take(LINE_BYTES_MAX)
            .read_until(b'\n', &mut line)?
            == 0
        {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        let mut out = prefix.as_bytes().to_vec();
        out.extend_from_slice(&line);
        let mut to = to.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        to.write_all(&out)?;
        to.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn every_line_gets_the_prefix() {
        let out = Mutex::new(Vec::new());
        forward_lines(&b"one\n\ntwo\nlast"[..], "[rank 2] ", &out).unwrap();
        assert_eq!(
            String::from_utf8(out.into_inner().unwrap()).unwrap(),
            "[rank 2] one\n[rank 2] \n[rank 2] two\n[rank 2] last\n"
        );
    }

    #[test]
    fn a_line_without_end_goes_out_in_pieces() {
        let out = Mutex::new(Vec::new());
        let long = vec![b'x'; 2 * LINE_BYTES_MAX as usize + 3];
        forward_lines(&long[..], "[rank 1] ", &out).unwrap();
        let out = String::from_utf8(out.into_inner().unwrap()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "two whole pieces and the rest");
        for (line, len) in lines
            .iter()
            .zip([LINE_BYTES_MAX as usize, LINE_BYTES_MAX as usize, 3])
        {
            assert_eq!(*line, format!("[rank 1] {}", "x".repeat(len)));
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        let out = Mutex::new(Vec::new());
        forward_lines(&b"\xff\xfe\n"[..], "[rank 0] ", &out).unwrap();
        assert_eq!(out.into_inner().unwrap(), b"[rank 0] \xff\xfe\n");
    }
}
