//! The demo's lecture-file exports (issue 18, seeds 000/001): a preview, a
//! confirm that answers at once with a capability URL, and the download it
//! names, served by the demo tool server itself.
//!
//! - `export_all_lms_materials()` previews every lecture file of the
//!   current courses: the file count, the estimated size, an `exportId`.
//! - `confirm_lms_material_export(exportId)` starts a job and answers at
//!   once `{status: "OK", data: {jobId, downloadUrl, expiresAt}}`; the URL
//!   is `ORIGIN/api/lms/exports/{jobId}/download?token=…`, valid for
//!   [`EXPORT_TTL`]. The ZIP is not built yet: for [`DEFAULT_BUILD_DELAY`]
//!   the download answers a page that polls (BUILDING), then the ZIP.
//! - A wrong token is 403, an expired one 410, both with no detail.
//! - A preview belongs to the [`Owner`] that asked for it (issue 20): to
//!   any other owner its exportId is unknown (`confirm` answers `None`).
//!   The download is a capability: whoever holds the URL may fetch it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::auth::Owner;

/// How long a capability URL stays valid.
pub const EXPORT_TTL: Duration = Duration::from_secs(20 * 60);
/// How long a job is BUILDING before its ZIP is served.
pub const DEFAULT_BUILD_DELAY: Duration = Duration::from_millis(1500);
/// The download path, as a `turnstile serve` config names it.
pub const EXPORT_PATH_TEMPLATE: &str = "/api/lms/exports/{jobId}/download";

/// One synthetic lecture file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LectureFile {
    pub path: String,
    pub contents: String,
}

/// The current courses' lecture files: 3 courses, 14 files.
pub fn lecture_files() -> Vec<LectureFile> {
    let courses = [
        ("CSE2010-data-structures", 6),
        ("MAT2020-linear-algebra", 5),
        ("HIS1030-korean-history", 3),
    ];
    let mut out = Vec::new();
    for (course, weeks) in courses {
        for week in 1..=weeks {
            let contents = format!(
                "{course}, week {week}: lecture notes.\n{}\n",
                "Synthetic lecture material for the turnstile demo. ".repeat(20 + week * 3)
            );
            out.push(LectureFile {
                path: format!("{course}/week-{week:02}.txt"),
                contents,
            });
        }
    }
    out
}

#[derive(Debug)]
struct Job {
    token: String,
    started: Instant,
    expires_at: SystemTime,
}

#[derive(Debug, Default)]
struct Inner {
    /// Previews by exportId: the file count and whose it is.
    previews: HashMap<String, (usize, Owner)>,
    /// Jobs by jobId.
    jobs: HashMap<String, Job>,
    /// The job each confirmed export started.
    job_of: HashMap<String, String>,
    confirms: HashMap<String, u64>,
    downloads: u64,
}

/// A preview: what an export would hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub export_id: String,
    pub file_count: usize,
    pub estimated_bytes: u64,
}

/// A confirmed export's job and capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub job_id: String,
    pub download_url: String,
    /// RFC 3339, UTC.
    pub expires_at: String,
}

/// What the download URL answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Download {
    /// The job is still BUILDING: a page that polls.
    Building,
    /// The ZIP.
    Ready(Vec<u8>),
    /// An unknown job or a wrong token (403, no detail).
    Forbidden,
    /// The capability expired (410, no detail).
    Gone,
}

/// Every export of one demo server.
#[derive(Debug)]
pub struct ExportStore {
    inner: Mutex<Inner>,
    /// `scheme://host:port` of the demo server, known once it is bound.
    origin: Mutex<String>,
    build_delay: Duration,
    ttl: Duration,
}

impl ExportStore {
    pub fn new(build_delay: Duration, ttl: Duration) -> Self {
        ExportStore {
            inner: Mutex::default(),
            origin: Mutex::new(String::new()),
            build_delay,
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The origin download URLs are minted on.
    pub fn set_origin(&self, origin: &str) {
        *self.origin.lock().unwrap_or_else(|e| e.into_inner()) = origin.to_string();
    }

    pub fn origin(&self) -> String {
        self.origin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A preview for the anonymous owner.
    pub fn preview(&self) -> Preview {
        self.preview_as(&Owner::Anonymous)
    }

    /// A preview that belongs to `owner`.
    pub fn preview_as(&self, owner: &Owner) -> Preview {
        let files = lecture_files();
        let bytes: u64 = files.iter().map(|f| f.contents.len() as u64).sum();
        let mut inner = self.lock();
        let export_id = format!("EXP-{}", inner.previews.len() + 1);
        inner
            .previews
            .insert(export_id.clone(), (files.len(), owner.clone()));
        Preview {
            export_id,
            file_count: files.len(),
            // Stored, not compressed: the ZIP's headers add a little.
            estimated_bytes: bytes + 100 * files.len() as u64,
        }
    }

    /// Starts the job of a previewed export, or answers the job it already
    /// started (a retried confirm starts nothing twice). `None`: no such
    /// preview.
    pub fn confirm(&self, export_id: &str) -> Option<Started> {
        self.confirm_as(&Owner::Anonymous, export_id)
    }

    /// [`confirm`](Self::confirm) as `owner`: another owner's preview is
    /// `None`, as an unknown one is.
    pub fn confirm_as(&self, owner: &Owner, export_id: &str) -> Option<Started> {
        let origin = self.origin();
        let mut inner = self.lock();
        if inner.previews.get(export_id).map(|(_, o)| o) != Some(owner) {
            return None;
        }
        *inner.confirms.entry(export_id.to_string()).or_default() += 1;
        let job_id = match inner.job_of.get(export_id) {
            Some(j) => j.clone(),
            None => {
                let job_id = format!("J{}", inner.jobs.len() + 1);
                let token = token();
                let job = Job {
                    token,
                    started: Instant::now(),
                    expires_at: SystemTime::now() + self.ttl,
                };
                inner.jobs.insert(job_id.clone(), job);
                inner.job_of.insert(export_id.to_string(), job_id.clone());
                job_id
            }
        };
        let job = &inner.jobs[&job_id];
        Some(Started {
            download_url: format!(
                "{origin}/api/lms/exports/{job_id}/download?token={}",
                job.token
            ),
            expires_at: rfc3339(job.expires_at),
            job_id,
        })
    }

    /// What `GET /api/lms/exports/{job_id}/download?token=…` answers.
    pub fn download(&self, job_id: &str, token: Option<&str>) -> Download {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.get(job_id) else {
            return Download::Forbidden;
        };
        if token != Some(job.token.as_str()) {
            return Download::Forbidden;
        }
        if SystemTime::now() > job.expires_at {
            return Download::Gone;
        }
        if job.started.elapsed() < self.build_delay {
            return Download::Building;
        }
        inner.downloads += 1;
        Download::Ready(zip(&lecture_files()))
    }

    /// How many confirms the export received (for tests).
    pub fn confirms(&self, export_id: &str) -> u64 {
        self.lock().confirms.get(export_id).copied().unwrap_or(0)
    }

    /// How many ZIPs were served (for tests).
    pub fn downloads(&self) -> u64 {
        self.lock().downloads
    }
}

/// 64 hex characters of randomness.
fn token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// `2026-12-02T10:20:00Z`.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let crate::data::Date { year, month, day } = crate::data::Date::from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A ZIP of `files`, stored (no compression): local headers, the central
/// directory, its end record.
pub fn zip(files: &[LectureFile]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for f in files {
        let (name, data) = (f.path.as_bytes(), f.contents.as_bytes());
        let crc = crc32(data);
        let offset = out.len() as u32;
        let (size, name_len) = (data.len() as u32, name.len() as u16);
        // Local file header.
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(data);
        // Its central directory entry.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&name_len.to_le_bytes());
        central.extend_from_slice(&[0; 12]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name);
    }
    let (dir_offset, dir_len) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let n = files.len() as u16;
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&dir_len.to_le_bytes());
    out.extend_from_slice(&dir_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// CRC-32 (IEEE), as ZIP needs it.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (!(crc & 1)).wrapping_add(1));
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_and_dates_are_the_standard_ones() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_174_400);
        assert_eq!(rfc3339(t), "2026-12-02T01:20:00Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_confirm_answers_a_capability_and_the_download_follows_it() {
        let store = ExportStore::new(Duration::ZERO, EXPORT_TTL);
        store.set_origin("http://127.0.0.1:9");
        let p = store.preview();
        assert_eq!(p.file_count, 14);
        assert!(store.confirm("EXP-404").is_none());
        let s = store.confirm(&p.export_id).unwrap();
        assert_eq!(
            store.confirm(&p.export_id).unwrap(),
            s,
            "a retry starts nothing"
        );
        assert_eq!(store.confirms(&p.export_id), 2);
        let token = s.download_url.split("token=").nth(1).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(store.download(&s.job_id, Some("nope")), Download::Forbidden);
        assert_eq!(store.download("J99", Some(token)), Download::Forbidden);
        let Download::Ready(zip) = store.download(&s.job_id, Some(token)) else {
            panic!("no zip");
        };
        assert_eq!(&zip[..4], b"PK\x03\x04");
        // Another owner's preview is unknown to it.
        let ana = Owner::Subject("user-ana".into());
        let p = store.preview_as(&ana);
        assert!(store.confirm(&p.export_id).is_none());
        assert!(store
            .confirm_as(&Owner::Subject("user-bo".into()), &p.export_id)
            .is_none());
        assert_eq!(store.confirms(&p.export_id), 0);
        assert!(store.confirm_as(&ana, &p.export_id).is_some());
        let expired = ExportStore::new(Duration::ZERO, Duration::ZERO);
        let p = expired.preview();
        let s = expired.confirm(&p.export_id).unwrap();
        let token = s.download_url.split("token=").nth(1).unwrap().to_string();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(expired.download(&s.job_id, Some(&token)), Download::Gone);
    }
}
