//! The source excerpt PyTorch prints under a parse error: the offending
//! line(s) with a line of `~` under the range and ` <--- HERE`.
//!
//! Note [Byte-exact highlight]
//! This follows `SourceRange::print_with_context` (context of 3 lines)
//! step by step, quirks included: only spaces (not tabs) before the range
//! are left blank under it, a range that starts with a space or only covers
//! the indentation of a line prints no caret line at all, and a range as
//! long as the whole input prints the input alone.  Everything is computed
//! on bytes, as C++ does; all printed slices start and end on ASCII
//! positions, so the output is valid UTF-8 whenever the input is.

const CONTEXT: usize = 3;

fn byte(s: &[u8], i: usize) -> u8 {
    // `std::string::operator[]` at `size()` yields the terminating NUL.
    s.get(i).copied().unwrap_or(0)
}

/// Appends PyTorch's highlight of `src[start..end]` to `out`.
pub(crate) fn highlight(out: &mut Vec<u8>, src: &[u8], start: usize, end: usize) {
    let len = src.len();
    let size = end.saturating_sub(start);
    if size == len {
        out.extend_from_slice(src);
        return;
    }
    let range_end = end.min(len);
    if start > len {
        return;
    }
    let mut begin_line = start;
    let mut end_line = range_end;
    while begin_line > 0 && src[begin_line - 1] != b'\n' {
        begin_line -= 1;
    }
    while end_line < len && src[end_line] != b'\n' {
        end_line += 1;
    }
    let mut begin_context = begin_line;
    let mut newlines = 0;
    while begin_context > 0 {
        if src[begin_context - 1] == b'\n' {
            newlines += 1;
        }
        if newlines >= CONTEXT {
            break;
        }
        begin_context -= 1;
    }
    let mut end_context = end_line;
    newlines = 0;
    while end_context < len {
        if src[end_context] == b'\n' {
            newlines += 1;
        }
        if newlines >= CONTEXT {
            break;
        }
        end_context += 1;
    }

    out.extend_from_slice(&src[begin_context..start]);
    let mut line_start = start;
    let mut line_end = start;
    while line_start < range_end {
        while line_end < len && src[line_end] != b'\n' {
            line_end += 1;
        }
        let actual_end = (line_end + 1).min(len);
        let actual_line = &src[line_start..actual_end];
        out.extend_from_slice(actual_line);
        if actual_line.last() != Some(&b'\n') {
            out.push(b'\n');
        }
        let mut highlight_begin = line_start;
        let mut highlight_end = line_start;
        while highlight_begin > 0 && src[highlight_begin - 1] != b'\n' {
            highlight_begin -= 1;
        }
        while highlight_end < range_end && src[highlight_end] != b'\n' {
            highlight_end += 1;
        }
        // Leading spaces, and anything before the range, stay blank.
        let empty_space = (highlight_begin..highlight_end)
            .take_while(|&i| src[i] == b' ' || i < start)
            .count();
        let highlight_space = highlight_end - highlight_begin - empty_space;
        if highlight_space > 0 {
            let more_lines = (line_end..=range_end).any(|i| !matches!(byte(src, i), b'\n' | b' '));
            out.resize(out.len() + empty_space, b' ');
            out.resize(out.len() + highlight_space, b'~');
            if more_lines && line_end != range_end {
                out.push(b'\n');
            } else {
                out.extend_from_slice(b" <--- HERE\n");
            }
        }
        line_end += 1;
        line_start = line_end;
    }
    if line_end <= len {
        // A negative count wraps to "the rest of the string" in C++.
        let stop = if end_context >= line_end {
            end_context
        } else {
            len
        };
        let tail = &src[line_end..stop];
        out.extend_from_slice(tail);
        if !tail.is_empty() && tail.last() != Some(&b'\n') {
            out.push(b'\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(src: &str, start: usize, end: usize) -> String {
        let mut out = Vec::new();
        highlight(&mut out, src.as_bytes(), start, end);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn single_line() {
        assert_eq!(h("foo(x) -> ()", 5, 6), "foo(x) -> ()\n     ~ <--- HERE\n");
        assert_eq!(
            h("foo(Tensor x Tensor y) -> ()", 13, 19),
            "foo(Tensor x Tensor y) -> ()\n             ~~~~~~ <--- HERE\n"
        );
    }

    #[test]
    fn eof_range() {
        let s = "foo(Tensor x) -> ((Tensor, Tensor)";
        assert_eq!(h(s, s.len(), s.len()), s);
        assert_eq!(h("", 0, 0), "");
    }

    #[test]
    fn indentation_range_prints_no_caret() {
        let s = "aten ::  lerp_\t. \n Scalar\t(\nTensor \n  (\na \n  ! \n  )self";
        assert_eq!(
            h(s, 18, 19),
            "aten ::  lerp_\t. \n Scalar\t(\nTensor \n  (\n"
        );
    }
}
