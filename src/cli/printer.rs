//! The one printer: every event the library reports reaches the user here.
//! Progress of downloads and long local work as bars on a terminal
//! (indicatif), as plain lines in a pipe (at most one every two seconds per
//! kind of work, and one when it ends); notes and warnings on stderr, past
//! the bars (`debforge: …`, `debforge: warning: …`); publish steps and
//! request logs. `--quiet` leaves warnings and errors only; `--json` leaves
//! stdout to the report.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use debforge::report::{Event, Reporter, Task};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Printer {
    quiet: bool,
    json: bool,
    bars: Option<Bars>,
    /// Per kind of local work: its bar (terminal) and when a line was last
    /// printed for it (pipe).
    work: Mutex<HashMap<Task, (Option<ProgressBar>, std::time::Instant)>>,
}

struct Bars {
    multi: MultiProgress,
    files: Mutex<HashMap<String, (ProgressBar, u64)>>,
    total: ProgressBar,
}

impl Printer {
    /// Bars when stderr is a terminal (and not `quiet`), lines otherwise.
    pub fn new(quiet: bool, json: bool) -> Printer {
        if quiet || !std::io::stderr().is_terminal() {
            return Printer {
                quiet,
                json,
                bars: None,
                work: Mutex::new(HashMap::new()),
            };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let total = multi.add(ProgressBar::new(0));
        total.set_style(
            ProgressStyle::with_template(
                "{prefix:>12} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        total.set_prefix("total");
        Printer {
            quiet,
            json,
            work: Mutex::new(HashMap::new()),
            bars: Some(Bars {
                multi,
                files: Mutex::new(HashMap::new()),
                total,
            }),
        }
    }

    /// The bytes about to be downloaded, for the total bar.
    pub fn expect_total(&self, bytes: u64) {
        if let Some(b) = &self.bars {
            b.total.set_length(bytes);
        }
    }

    /// Clears the bars (before the results go to stdout).
    pub fn finish(&self) {
        if let Some(b) = &self.bars {
            b.total.finish_and_clear();
            let _ = b.multi.clear();
        }
    }

    /// A note for people: nothing with `--quiet`.
    pub fn note(&self, message: &str) {
        if !self.quiet {
            self.line(&format!("debforge: {message}"));
        }
    }

    /// A warning: always shown.
    pub fn warning(&self, message: &str) {
        self.line(&format!("debforge: warning: {message}"));
    }

    fn line(&self, text: &str) {
        match &self.bars {
            Some(b) => {
                let _ = b.multi.println(text);
            }
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }
}

impl Printer {
    fn work(&self, task: Task, done: u64, total: u64, item: &str) {
        let mut work = self.work.lock().expect("work");
        let finished = done >= total;
        let label = task.label();
        match &self.bars {
            Some(b) => {
                let (bar, _) = work.entry(task).or_insert_with(|| {
                    let bar = b.multi.insert_before(&b.total, ProgressBar::new(total));
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{prefix:>12} [{bar:30}] {pos}/{len} {msg:40!}",
                        )
                        .expect("template")
                        .progress_chars("=> "),
                    );
                    bar.set_prefix(label);
                    (Some(bar), std::time::Instant::now())
                });
                if let Some(bar) = bar {
                    bar.set_length(total);
                    bar.set_position(done);
                    bar.set_message(item.to_string());
                }
                if finished && let Some((Some(bar), _)) = work.remove(&task) {
                    bar.finish_and_clear();
                }
            }
            None => {
                let now = std::time::Instant::now();
                let due = match work.get(&task) {
                    None => true,
                    Some((_, last)) => now.duration_since(*last).as_secs() >= 2,
                };
                if finished {
                    work.remove(&task);
                    drop(work);
                    self.line(&format!("{label}: {total} of {total} done"));
                } else if due {
                    work.insert(task, (None, now));
                    drop(work);
                    self.line(&format!("{label}: {done} of {total} done, now {item}"));
                }
            }
        }
    }
}

impl Reporter for Printer {
    fn wants_total(&self) -> bool {
        self.bars.is_some()
    }

    fn event(&self, event: Event) {
        if self.quiet && !matches!(event, Event::Warning { .. }) {
            return;
        }
        match event {
            Event::Note { message } => self.note(&message),
            Event::Total { bytes } => self.expect_total(bytes),
            Event::Published {
                step,
                path,
                dry_run,
            } => self.published(step, &path, dry_run),
            Event::Start {
                name,
                total,
                resumed_from,
            } => self.download_started(name, total, resumed_from),
            Event::Progress { name, bytes } => self.download_progress(&name, bytes),
            Event::Done { name } => self.download_done(&name),
            Event::Cached { name } => self.line(&format!(
                "cached  {name} (verified earlier; its source was not read again)"
            )),
            Event::Copied { name, from } => self.line(&format!("copied  {name} from {from}")),
            Event::Warning { message } => self.warning(&message),
            Event::Carried {
                package,
                suffix,
                follows,
            } => self.line(&format!(
                "{package}: {suffix}, follows {follows} (it depends on that exact version)"
            )),
            Event::Work {
                task,
                done,
                total,
                item,
            } => self.work(task, done, total, &item),
            Event::Retry {
                name,
                attempt,
                reason,
                wait,
            } => self.line(&format!(
                "retrying {name} in {:.1}s (attempt {attempt}): {reason}",
                wait.as_secs_f64()
            )),
        }
    }
}

impl Printer {
    fn download_started(&self, name: String, total: u64, resumed_from: u64) {
        let Some(b) = &self.bars else {
            let from = if resumed_from > 0 {
                format!(", resuming at {resumed_from}")
            } else {
                String::new()
            };
            self.line(&format!("fetching {name} ({total} bytes{from})"));
            return;
        };
        let bar = b.multi.insert_before(&b.total, ProgressBar::new(total));
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:40!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        bar.set_message(name.clone());
        bar.set_position(resumed_from);
        b.total.inc(resumed_from);
        b.files
            .lock()
            .expect("bars")
            .insert(name, (bar, resumed_from));
    }

    fn download_progress(&self, name: &str, bytes: u64) {
        if let Some(b) = &self.bars
            && let Some((bar, last)) = b.files.lock().expect("bars").get_mut(name)
        {
            bar.set_position(bytes);
            b.total.inc(bytes.saturating_sub(*last));
            *last = bytes;
        }
    }

    fn download_done(&self, name: &str) {
        if let Some(b) = &self.bars
            && let Some((bar, _)) = b.files.lock().expect("bars").remove(name)
        {
            bar.finish_and_clear();
        }
        self.line(&format!("fetched {name}"));
    }
}

impl Printer {
    /// A line per file copied or removed, flushed at once (a long publish
    /// shows how far it is); nothing with `--json` (the report says it all).
    fn published(&self, step: debforge::publish::Step, path: &str, dry_run: bool) {
        use debforge::publish::Step;
        if self.json {
            return;
        }
        let verb = match (step, dry_run) {
            (Step::Copy, false) => "copied     ",
            (Step::Copy, true) => "would copy ",
            (Step::Delete, false) => "removed    ",
            (Step::Delete, true) => "would remove",
            (Step::Keep, _) => return,
        };
        super::output::plain(&format!("{verb} {path}\n"));
    }
}

/// `debforge serve`'s log: a line on stderr per request, and per connection
/// refused (shown with `--quiet` too: it is what serve is run for). Serve's
/// connections run on other threads; this printer holds no bars.
pub struct ServeLog;

impl Printer {
    pub fn for_serve(&self) -> ServeLog {
        ServeLog
    }
}

impl debforge::serve::ServeReporter for ServeLog {
    fn request(&self, r: debforge::serve::RequestLog) {
        line(&format!(
            "{} {} {} {} {}",
            r.peer, r.method, r.path, r.status, r.bytes
        ));
    }

    fn refused(&self, peer: std::net::SocketAddr, reason: String) {
        line(&format!("{peer} - - refused: {reason}"));
    }
}

fn line(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
