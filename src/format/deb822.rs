//! deb822 paragraphs: the `Field: value` format of control files, `Packages`
//! and `Release`.
//!
//! Spec: deb822(5) (<https://manpages.debian.org/deb822>) and Debian Policy §5.1
//! (<https://www.debian.org/doc/debian-policy/ch-controlfields.html#syntax-of-control-files>).
//!
//! The model keeps every byte it read: field names in their original case and
//! order, each value exactly as written (leading space, continuation lines,
//! ` .` blank-line markers), comment lines and the blank lines between
//! paragraphs. Parsing then serializing a file gives the same bytes back; a
//! field that is set through the API is written in the canonical form.

use std::fmt;
use std::io::BufRead;

/// One `Name: value` field, as written: a view into its paragraph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    name: &'a str,
    /// Everything after the colon up to (not including) the newline that ends
    /// the field: the first line and all its continuation lines.
    raw: &'a str,
    comments: Option<&'a Comments>,
}

/// The comment lines around a field, where it has any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Comments {
    /// Comment lines (`#…\n`) that stood just before the field.
    before: String,
    /// Comment lines between continuation lines (allowed by deb822(5) in
    /// source control files): each with the number of value lines before it.
    inner: Vec<(usize, String)>,
}

impl<'a> Field<'a> {
    pub fn name(self) -> &'a str {
        self.name
    }

    /// The value with surrounding whitespace removed; continuation lines keep
    /// their leading space, as in the file.
    pub fn value(self) -> &'a str {
        self.raw.trim_matches(is_blank_or_newline)
    }

    /// The value as the file has it, as apt-ftparchive copies it into an
    /// index: the blanks after the colon and at the very end dropped, every
    /// other byte kept (a trailing space on a Description's first line
    /// changes its `Description-md5`).
    pub fn verbatim(self) -> &'a str {
        self.raw
            .trim_start_matches(is_blank)
            .trim_end_matches(is_blank_or_newline)
    }

    /// The value's lines, each without its indentation: a non-empty first line,
    /// then the continuation lines (` .` gives an empty line).
    pub fn lines(self) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut parts = self.raw.split('\n');
        if let Some(first) = parts.next() {
            let first = first.trim_matches(is_blank);
            if !first.is_empty() {
                out.push(first);
            }
        }
        for line in parts {
            let line = line.trim_start_matches(is_blank).trim_end_matches(is_blank);
            out.push(if line == "." { "" } else { line });
        }
        out
    }

    /// The value folded onto one line (relation fields may be wrapped).
    pub fn folded(self) -> String {
        self.lines().join(" ")
    }
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}
fn is_blank_or_newline(c: char) -> bool {
    is_blank(c) || c == '\n'
}

/// A paragraph (stanza) of a control file, as Debian Policy §5.1 names
/// every deb822 file: the fields of one package (`DEBIAN/control`, a
/// Packages stanza), one Release, one source.
///
/// Compact: a build holds every package's control paragraph at once, so
/// the fields live in one string (`Name:raw`, back to back) with the end
/// of each name and of each field beside it, not one allocation per name
/// and per value. Nearly no field has comments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlParagraph {
    text: String,
    /// Each field's colon and end in `text`; a field starts where the one
    /// before it ends.
    spans: Vec<Span>,
    /// Comments by field index, in field order.
    comments: FieldComments,
    /// 1-based line of the first field in the parsed input (0 when built).
    line: usize,
}

/// A paragraph's comments by field index: boxed, as nearly no paragraph
/// has any (8 bytes a paragraph, not a vector's 24: with it, a prepared
/// package is no bigger than the fetched file it is made from, and the
/// build makes one in the other's place, see `pipeline::prepare`).
// A thin box: a boxed slice would be 16 bytes.
#[allow(clippy::box_collection)]
#[derive(Debug, Clone, Default)]
struct FieldComments(Option<Box<Vec<(usize, Comments)>>>);

impl FieldComments {
    fn as_slice(&self) -> &[(usize, Comments)] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    fn as_mut_slice(&mut self) -> &mut [(usize, Comments)] {
        match &mut self.0 {
            Some(v) => v.as_mut_slice(),
            None => &mut [],
        }
    }

    fn push(&mut self, comment: (usize, Comments)) {
        self.0.get_or_insert_default().push(comment);
    }

    fn retain(&mut self, keep: impl FnMut(&(usize, Comments)) -> bool) {
        if let Some(v) = &mut self.0 {
            v.retain(keep);
            if v.is_empty() {
                self.0 = None;
            }
        }
    }

    fn shrink(&mut self) {
        if let Some(v) = &mut self.0 {
            v.shrink_to_fit();
        }
    }
}

/// Equal when they hold the same comments (none and an emptied list alike).
impl PartialEq for FieldComments {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for FieldComments {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    colon: u32,
    end: u32,
}

/// A paragraph's text is bounded far below 4 GiB (indexes are read with
/// [`MAX_STREAMED_PARAGRAPH`]; controls with the input limits).
fn offset(at: usize) -> u32 {
    u32::try_from(at).expect("a paragraph is smaller than 4 GiB")
}

impl ControlParagraph {
    pub fn new() -> ControlParagraph {
        ControlParagraph::default()
    }

    /// The 1-based line on which the paragraph started in its file.
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.spans[i - 1].end as usize
        }
    }

    fn field_at(&self, i: usize) -> Field<'_> {
        let Span { colon, end } = self.spans[i];
        Field {
            name: &self.text[self.start(i)..colon as usize],
            raw: &self.text[colon as usize + 1..end as usize],
            comments: self
                .comments
                .as_slice()
                .iter()
                .find(|(at, _)| *at == i)
                .map(|(_, c)| c),
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        (0..self.spans.len()).find(|&i| {
            self.text[self.start(i)..self.spans[i].colon as usize].eq_ignore_ascii_case(name)
        })
    }

    pub fn fields(&self) -> impl Iterator<Item = Field<'_>> {
        (0..self.spans.len()).map(|i| self.field_at(i))
    }

    /// The field named `name` (field names compare case-insensitively).
    pub fn field(&self, name: &str) -> Option<Field<'_>> {
        self.position(name).map(|i| self.field_at(i))
    }

    /// The trimmed value of `name`; see [`Field::value`].
    pub fn get(&self, name: &str) -> Option<&str> {
        self.field(name).map(Field::value)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Appends a field.
    fn push(&mut self, name: &str, raw: &str) {
        self.text.push_str(name);
        let colon = offset(self.text.len());
        self.text.push(':');
        self.text.push_str(raw);
        let end = offset(self.text.len());
        self.spans.push(Span { colon, end });
    }

    /// Moves the spans from field `from` on by `by` bytes.
    fn shift(&mut self, from: usize, by: isize) {
        for s in &mut self.spans[from..] {
            s.colon = offset((s.colon as isize + by) as usize);
            s.end = offset((s.end as isize + by) as usize);
        }
    }

    /// Replaces field `i`'s value (after the colon).
    fn replace_raw(&mut self, i: usize, raw: &str) {
        let Span { colon, end } = self.spans[i];
        self.text
            .replace_range(colon as usize + 1..end as usize, raw);
        let by = raw.len() as isize - (end - colon - 1) as isize;
        self.spans[i].end = offset(colon as usize + 1 + raw.len());
        self.shift(i + 1, by);
    }

    /// Inserts a field before field `i`.
    fn insert(&mut self, i: usize, name: &str, raw: &str) {
        let at = self.start(i);
        self.text.insert_str(at, &format!("{name}:{raw}"));
        self.shift(i, (name.len() + 1 + raw.len()) as isize);
        let colon = offset(at + name.len());
        let end = offset(at + name.len() + 1 + raw.len());
        self.spans.insert(i, Span { colon, end });
        for (at, _) in self.comments.as_mut_slice() {
            if *at >= i {
                *at += 1;
            }
        }
    }

    /// Sets `name` to `value`, in place when the field exists (keeping the
    /// name's case), at the end otherwise. Multi-line values are written in
    /// the canonical form: continuation lines indented by one space, empty
    /// lines as ` .`.
    pub fn set(&mut self, name: &str, value: &str) {
        self.set_raw(name, &canonical_raw(value));
    }

    fn set_raw(&mut self, name: &str, raw: &str) {
        match self.position(name) {
            Some(i) => self.replace_raw(i, raw),
            None => self.push(name, raw),
        }
    }

    /// Sets `name` to a value taken from another paragraph with
    /// [`Field::verbatim`], byte for byte (no re-indenting or trimming).
    pub fn set_verbatim(&mut self, name: &str, value: &str) {
        if value.starts_with('\n') || value.is_empty() {
            self.set_raw(name, value);
        } else {
            self.set_raw(name, &format!(" {value}"));
        }
    }

    /// Inserts a new field right after `anchor` (or at the end when `anchor` is
    /// absent); replaces the value when `name` already exists.
    pub fn insert_after(&mut self, anchor: &str, name: &str, value: &str) {
        if self.contains(name) {
            self.set(name, value);
            return;
        }
        let at = self
            .position(anchor)
            .map(|i| i + 1)
            .unwrap_or(self.spans.len());
        self.insert(at, name, &canonical_raw(value));
    }

    /// Removes `name`, returning whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        let mut removed = false;
        while let Some(i) = self.position(name) {
            let (start, end) = (self.start(i), self.spans[i].end as usize);
            self.text.replace_range(start..end, "");
            self.spans.remove(i);
            self.shift(i, -((end - start) as isize));
            self.comments.retain(|(at, _)| *at != i);
            for (at, _) in self.comments.as_mut_slice() {
                if *at > i {
                    *at -= 1;
                }
            }
            removed = true;
        }
        removed
    }

    /// The comments of the last field, made where it has none.
    fn last_comments(&mut self) -> Option<&mut Comments> {
        let last = self.spans.len().checked_sub(1)?;
        if self
            .comments
            .as_slice()
            .last()
            .is_none_or(|(at, _)| *at != last)
        {
            self.comments.push((last, Comments::default()));
        }
        self.comments.as_mut_slice().last_mut().map(|(_, c)| c)
    }

    /// Held, often by the thousand: no spare capacity.
    fn shrink(&mut self) {
        self.text.shrink_to_fit();
        self.spans.shrink_to_fit();
        self.comments.shrink();
    }

    /// Parses text that must hold exactly one paragraph (a `DEBIAN/control`).
    pub fn parse_single(text: &str) -> Result<ControlParagraph, ParseError> {
        let doc = Document::parse(text)?;
        let mut paragraphs = doc.paragraphs.into_iter().map(|(_, p)| p);
        match (paragraphs.next(), paragraphs.next()) {
            (Some(p), None) => Ok(p),
            (None, _) => Err(ParseError {
                line: 1,
                kind: ParseErrorKind::NoParagraph,
            }),
            (Some(_), Some(second)) => Err(ParseError {
                line: second.line,
                kind: ParseErrorKind::ExtraParagraph,
            }),
        }
    }
}

/// A value as [`ControlParagraph::set`] stores it (after the colon).
pub(crate) fn canonical_raw(value: &str) -> String {
    let mut raw = String::new();
    let mut lines = value.split('\n');
    let first = lines.next().unwrap_or("").trim_matches(is_blank);
    if !first.is_empty() {
        raw.push(' ');
        raw.push_str(first);
    }
    for line in lines {
        raw.push('\n');
        let line = line.trim_end_matches(is_blank);
        if line.trim_start_matches(is_blank).is_empty() {
            raw.push_str(" .");
        } else if line.starts_with(is_blank) {
            raw.push_str(line);
        } else {
            raw.push(' ');
            raw.push_str(line);
        }
    }
    raw
}

impl fmt::Display for ControlParagraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for field in self.fields() {
            let comments = field.comments;
            let before = comments.map_or("", |c| c.before.as_str());
            write!(f, "{before}{}:", field.name)?;
            let mut comments = comments.into_iter().flat_map(|c| &c.inner).peekable();
            for (i, line) in field.raw.split('\n').enumerate() {
                if i > 0 {
                    f.write_str("\n")?;
                }
                while let Some((_, c)) = comments.next_if(|(at, _)| *at == i) {
                    f.write_str(c)?;
                }
                f.write_str(line)?;
            }
            f.write_str("\n")?;
        }
        Ok(())
    }
}

/// A whole deb822 file: paragraphs and what stood between them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Document {
    /// Each paragraph with the blank and comment lines before it.
    paragraphs: Vec<(String, ControlParagraph)>,
    /// Blank and comment lines after the last paragraph.
    trailing: String,
    /// False when the input's last line had no newline.
    final_newline: bool,
}

impl Document {
    pub fn new() -> Document {
        Document {
            final_newline: true,
            ..Document::default()
        }
    }

    pub fn parse(text: &str) -> Result<Document, ParseError> {
        let mut parser = LineParser::default();
        let mut doc = Document::new();
        for line in text.split_inclusive('\n') {
            if let Some(done) = parser.push(line)? {
                doc.paragraphs.push(done);
            }
        }
        let (last, trailing) = parser.finish();
        if let Some(done) = last {
            doc.paragraphs.push(done);
        }
        doc.trailing = trailing;
        doc.final_newline = text.is_empty() || text.ends_with('\n');
        Ok(doc)
    }

    pub fn paragraphs(&self) -> impl Iterator<Item = &ControlParagraph> {
        self.paragraphs.iter().map(|(_, p)| p)
    }

    /// Appends a paragraph, separated from the previous one by a blank line.
    pub fn push(&mut self, paragraph: ControlParagraph) {
        let sep = if self.paragraphs.is_empty() { "" } else { "\n" };
        self.paragraphs.push((sep.to_string(), paragraph));
    }
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for (sep, p) in &self.paragraphs {
            out.push_str(sep);
            out.push_str(&p.to_string());
        }
        out.push_str(&self.trailing);
        if !self.final_newline && out.ends_with('\n') {
            out.pop();
        }
        f.write_str(&out)
    }
}

/// A syntax error, with the 1-based line it was found on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct ParseError {
    pub line: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("continuation line (starting with a space) outside a field")]
    ContinuationOutsideField,
    #[error("expected 'Name: value', found {0:?}")]
    NotAField(String),
    #[error("empty field name")]
    EmptyName,
    #[error(
        "invalid field name {0:?}: names are printable ASCII without spaces and do not start with '-' or '#'"
    )]
    BadName(String),
    #[error("duplicate field {name:?} (first on line {first_line})")]
    Duplicate { name: String, first_line: usize },
    #[error("no paragraph found")]
    NoParagraph,
    #[error("a second paragraph starts here, but only one is allowed")]
    ExtraParagraph,
    #[error("line is not valid UTF-8")]
    NotUtf8,
    #[error("read failed: {0}")]
    Io(String),
    #[error("{what} is longer than {limit} bytes, the limit when streaming an index")]
    TooLong { what: &'static str, limit: usize },
}

/// Limits of [`ParagraphReader`], which reads untrusted indexes: one line,
/// one paragraph. (Real Packages stanzas are a few KB; the longest
/// `Description`s a few hundred.)
pub const MAX_STREAMED_LINE: usize = 1 << 20;
pub const MAX_STREAMED_PARAGRAPH: usize = 16 << 20;

/// The line-at-a-time state machine shared by [`Document::parse`] and
/// [`ParagraphReader`].
#[derive(Default)]
struct LineParser {
    line_no: usize,
    current: Option<ControlParagraph>,
    /// Line numbers of the current paragraph's fields, for duplicate errors.
    field_lines: Vec<usize>,
    /// Blank and comment lines not yet attached to anything.
    pending: String,
    /// Comment lines inside the current paragraph since its last field.
    pending_comments: String,
    /// Streaming: keep no separator text (blank lines and comments between
    /// paragraphs), which no caller reads and which a hostile index could
    /// make as large as itself; bound each paragraph.
    streaming: bool,
    /// Bytes of the current paragraph so far.
    current_bytes: usize,
}

impl LineParser {
    /// Feeds one line (with its `\n`, if any). Returns a paragraph when this
    /// line closed one, together with the separator text that preceded it.
    fn push(&mut self, line: &str) -> Result<Option<(String, ControlParagraph)>, ParseError> {
        self.line_no += 1;
        let err = |kind| ParseError {
            line: self.line_no,
            kind,
        };
        let content = line.strip_suffix('\n').unwrap_or(line);
        if content.chars().all(is_blank) {
            let closed = self.close();
            if !self.streaming {
                self.pending.push_str(line);
            }
            return Ok(closed);
        }
        if self.streaming {
            self.current_bytes += line.len();
            if self.current_bytes > MAX_STREAMED_PARAGRAPH {
                return Err(err(ParseErrorKind::TooLong {
                    what: "a paragraph",
                    limit: MAX_STREAMED_PARAGRAPH,
                }));
            }
        }
        if content.starts_with('#') {
            match (&self.current, self.streaming) {
                (Some(_), _) => self.pending_comments.push_str(line),
                (None, false) => self.pending.push_str(line),
                (None, true) => {}
            }
            return Ok(None);
        }
        if content.starts_with(is_blank) {
            let Some(paragraph) = self.current.as_mut().filter(|p| !p.is_empty()) else {
                return Err(err(ParseErrorKind::ContinuationOutsideField));
            };
            // A comment may stand even between continuation lines (deb822(5)).
            if !self.pending_comments.is_empty() {
                let last = paragraph.spans.len() - 1;
                let at = paragraph.field_at(last).raw.matches('\n').count() + 1;
                let comment = std::mem::take(&mut self.pending_comments);
                if let Some(c) = paragraph.last_comments() {
                    c.inner.push((at, comment));
                }
            }
            // The last field ends the text: its value grows in place.
            paragraph.text.push('\n');
            paragraph.text.push_str(content);
            let end = offset(paragraph.text.len());
            if let Some(s) = paragraph.spans.last_mut() {
                s.end = end;
            }
            return Ok(None);
        }
        let Some(colon) = content.find(':') else {
            return Err(err(ParseErrorKind::NotAField(shorten(content))));
        };
        let name = &content[..colon];
        if name.is_empty() {
            return Err(err(ParseErrorKind::EmptyName));
        }
        if name.starts_with('-') || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(err(ParseErrorKind::BadName(shorten(name))));
        }
        let paragraph = self.current.get_or_insert_with(|| ControlParagraph {
            line: self.line_no,
            ..ControlParagraph::default()
        });
        if let Some(i) = paragraph.position(name) {
            return Err(ParseError {
                line: self.line_no,
                kind: ParseErrorKind::Duplicate {
                    name: name.to_string(),
                    first_line: self.field_lines[i],
                },
            });
        }
        paragraph.push(name, &content[colon + 1..]);
        if !self.pending_comments.is_empty() {
            let before = std::mem::take(&mut self.pending_comments);
            if let Some(c) = paragraph.last_comments() {
                c.before = before;
            }
        }
        self.field_lines.push(self.line_no);
        Ok(None)
    }

    fn close(&mut self) -> Option<(String, ControlParagraph)> {
        self.current_bytes = 0;
        let mut paragraph = self.current.take()?;
        paragraph.shrink();
        self.field_lines.clear();
        let sep = std::mem::take(&mut self.pending);
        // Comments after a paragraph's last field belong to what follows it.
        self.pending = std::mem::take(&mut self.pending_comments);
        Some((sep, paragraph))
    }

    fn finish(mut self) -> (Option<(String, ControlParagraph)>, String) {
        let last = self.close();
        (last, self.pending)
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(60).collect();
        format!("{cut}…")
    } else {
        s.to_string()
    }
}

/// Streams paragraphs out of a large file (a `Packages` index) without holding
/// it whole.
pub struct ParagraphReader<R> {
    reader: R,
    parser: Option<LineParser>,
    buf: Vec<u8>,
}

impl<R: BufRead> ParagraphReader<R> {
    pub fn new(reader: R) -> Self {
        ParagraphReader {
            reader,
            parser: Some(LineParser {
                streaming: true,
                ..LineParser::default()
            }),
            buf: Vec::new(),
        }
    }
}

impl<R: BufRead> Iterator for ParagraphReader<R> {
    type Item = Result<ControlParagraph, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let parser = self.parser.as_mut()?;
            self.buf.clear();
            let line_no = parser.line_no + 1;
            let read = std::io::Read::take(&mut self.reader, MAX_STREAMED_LINE as u64 + 1)
                .read_until(b'\n', &mut self.buf);
            if self.buf.len() > MAX_STREAMED_LINE {
                self.parser = None;
                return Some(Err(ParseError {
                    line: line_no,
                    kind: ParseErrorKind::TooLong {
                        what: "a line",
                        limit: MAX_STREAMED_LINE,
                    },
                }));
            }
            match read {
                Ok(0) => {
                    let parser = self.parser.take()?;
                    return parser.finish().0.map(|(_, p)| Ok(p));
                }
                Ok(_) => {}
                Err(e) => {
                    self.parser = None;
                    return Some(Err(ParseError {
                        line: line_no,
                        kind: ParseErrorKind::Io(e.to_string()),
                    }));
                }
            }
            let Ok(line) = std::str::from_utf8(&self.buf) else {
                self.parser = None;
                return Some(Err(ParseError {
                    line: line_no,
                    kind: ParseErrorKind::NotUtf8,
                }));
            };
            match parser.push(line) {
                Ok(Some((_, p))) => return Some(Ok(p)),
                Ok(None) => {}
                Err(e) => {
                    self.parser = None;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// The values of `names` in the text of one paragraph, as
/// [`ControlParagraph::parse_single`] and [`ControlParagraph::get`] give
/// them, read without building the paragraph (a build checks every
/// package's identity against its recorded control). `None` unless the
/// text is plainly one paragraph of fields: a comment or blank line, a
/// field named twice, a line that is no field, or a continuation of one of
/// `names` sends the caller to the parser.
pub fn simple_fields<'t, const N: usize>(
    text: &'t str,
    names: [&str; N],
) -> Option<[Option<&'t str>; N]> {
    let mut found = [None; N];
    let mut seen: Vec<&str> = Vec::with_capacity(16);
    // Whether the last field was one of `names` (its continuation is not
    // read here).
    let mut wanted = false;
    let body = text.strip_suffix('\n').unwrap_or(text);
    for line in body.split('\n') {
        if line.starts_with(is_blank) {
            if wanted || seen.is_empty() || line.chars().all(is_blank) {
                return None;
            }
            continue;
        }
        let (name, raw) = line.split_once(':')?;
        let good = !name.is_empty()
            && !name.starts_with(['-', '#'])
            && name.bytes().all(|b| b.is_ascii_graphic());
        if !good || seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            return None;
        }
        seen.push(name);
        let at = names.iter().position(|n| n.eq_ignore_ascii_case(name));
        wanted = at.is_some();
        if let Some(i) = at {
            found[i] = Some(raw.trim_matches(is_blank_or_newline));
        }
    }
    (!seen.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wherever the peek answers, it answers what the parser says; it
    /// answers for a plain control.
    #[test]
    fn simple_fields_agree_with_the_parser() {
        let names = ["Package", "Version", "Architecture"];
        let plain =
            "Package: a\nVersion:  1:2.0-1 \nArchitecture: amd64\nDescription: x\n more\n .\n";
        assert_eq!(
            simple_fields(plain, names),
            Some([Some("a"), Some("1:2.0-1"), Some("amd64")])
        );
        for text in [
            plain,
            "package: a\nVERSION: 1\n",
            "Package: a\nVersion: 1\n continued\n",
            "Package: a\nPackage: b\n",
            "Package: a\npackage: b\n",
            "Package: a\n\nVersion: 1\n",
            "Package: a\n\n",
            "Package: a\n \n",
            "Package: a\n\t\nVersion: 2\n",
            " Package: a\n",
            "# c\nPackage: a\n",
            "Package: a\n# c\nVersion: 1\n",
            "Package: a\nno colon here\n",
            ":x\n",
            "-A: x\nPackage: a\n",
            "Pack age: a\n",
            "Package:\n",
            "Package:a\r\n",
            "Package: a",
            "Package: a\nVersion: 1\nArchitecture: all\nDepends: b,\n c\n",
            "",
            "\n",
        ] {
            let peek = simple_fields(text, names);
            let parsed = ControlParagraph::parse_single(text)
                .ok()
                .map(|p| names.map(|n| p.get(n).map(str::to_string)));
            if let Some(peek) = peek {
                let peek = peek.map(|v| v.map(str::to_string));
                assert_eq!(Some(peek), parsed, "{text:?}");
            }
        }
    }

    #[test]
    fn round_trips_odd_layouts() {
        for text in [
            "",
            "A: b\n",
            "A: b",
            "\n\nA: b\n\n\nC:d\n \n",
            "# comment\nA: b\n# inner\nB:  c \n multi\n .\n# mid\n more\n\n#tail\n",
            "SHA256:\n 0123 12 main/binary-amd64/Packages\n",
            "A: b\n\t\n",
        ] {
            // A line of only whitespace ends the paragraph, so "\t\n" is a separator.
            let doc = Document::parse(text).unwrap();
            assert_eq!(doc.to_string(), text, "{text:?}");
        }
    }

    #[test]
    fn values_and_lines() {
        let p = ControlParagraph::parse_single(
            "Package: libcudnn7\nDescription: cuDNN runtime libraries\n Line one.\n .\n Line two.\nsha256:\n aa 1 x\n bb 2 y\n",
        )
        .unwrap();
        assert_eq!(p.get("package"), Some("libcudnn7"));
        let d = p.field("Description").unwrap();
        assert_eq!(
            d.lines(),
            vec!["cuDNN runtime libraries", "Line one.", "", "Line two."]
        );
        assert_eq!(p.field("SHA256").unwrap().lines(), vec!["aa 1 x", "bb 2 y"]);
        assert_eq!(p.field("SHA256").unwrap().name(), "sha256");
    }

    #[test]
    fn set_and_insert_write_canonical_form() {
        let mut p = ControlParagraph::parse_single("Package: a\nVersion: 1\n").unwrap();
        p.set("version", "2");
        p.insert_after("Package", "Architecture", "all");
        p.set("Description", "short\nlong text\n\nmore");
        assert_eq!(
            p.to_string(),
            "Package: a\nArchitecture: all\nVersion: 2\nDescription: short\n long text\n .\n more\n"
        );
        assert!(p.remove("Architecture"));
        assert!(!p.contains("architecture"));
    }

    /// Edits move the fields after them (one string holds them all) and
    /// keep each comment with its field.
    #[test]
    fn edits_keep_comments_with_their_fields() {
        let text = "A: 1\n# b\nB: 2\n# c\nC: 3\n more\n# in\n last\nD: 4\n";
        let mut p = ControlParagraph::parse_single(text).unwrap();
        assert_eq!(p.to_string(), text);
        p.insert_after("A", "N", "new");
        p.set("B", "two\nlines");
        assert!(p.remove("A"));
        p.set_verbatim("D", "x\n y");
        // A value shorter than everything before its colon.
        let mut short =
            ControlParagraph::parse_single("Package: a-long-name\nVersion: 1\n").unwrap();
        short.set("Package", "x");
        assert_eq!(short.to_string(), "Package: x\nVersion: 1\n");
        let edited = "N: new\n# b\nB: two\n lines\n# c\nC: 3\n more\n# in\n last\nD: x\n y\n";
        assert_eq!(p.to_string(), edited);
        let names: Vec<&str> = p.fields().map(Field::name).collect();
        assert_eq!(names, ["N", "B", "C", "D"]);
        assert_eq!(p.get("c"), Some("3\n more\n last"));
        assert!(p.remove("C"));
        assert_eq!(p.to_string(), "N: new\n# b\nB: two\n lines\nD: x\n y\n");
        // The same fields parsed: the same paragraph (but for its line).
        let mut q = ControlParagraph::parse_single(&p.to_string()).unwrap();
        q.line = p.line;
        assert_eq!(p, q);
    }

    #[test]
    fn errors_carry_line_numbers() {
        let e = Document::parse("A: b\nC: d\nA: e\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(matches!(
            e.kind,
            ParseErrorKind::Duplicate { first_line: 1, .. }
        ));
        assert_eq!(Document::parse(" x\n").unwrap_err().line, 1);
        assert_eq!(Document::parse("A: b\n\nno colon\n").unwrap_err().line, 3);
        assert!(matches!(
            Document::parse("-A: b\n").unwrap_err().kind,
            ParseErrorKind::BadName(_)
        ));
        assert!(matches!(
            ControlParagraph::parse_single("A: b\n\nB: c\n").unwrap_err(),
            ParseError {
                line: 3,
                kind: ParseErrorKind::ExtraParagraph
            }
        ));
    }

    #[test]
    fn reader_streams_paragraphs() {
        let text = "A: 1\n\nA: 2\n B\n\n\nA: 3";
        let got: Vec<_> = ParagraphReader::new(text.as_bytes())
            .map(|p| p.unwrap().get("A").unwrap().to_string())
            .collect();
        assert_eq!(got, vec!["1", "2\n B", "3"]);
    }
}
