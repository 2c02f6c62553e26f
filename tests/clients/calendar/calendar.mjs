// calendar.mjs - calendar material from libraries nobody here wrote, for
// tests/invite_test.go. Reads one JSON object on stdin:
//   {"make": [invitation...], "parse": ["ics text"...]}
// and writes {"made": ["ics"...], "parsed": [calendar...]} on stdout.
// Invitations are made by ical-generator as calendar apps make them (a
// time zone with its VTIMEZONE, a weekly recurrence, attendees asked to
// answer); replies are parsed by node-ical, independently of the gateway.
import ical, { ICalCalendarMethod, ICalEventRepeatingFreq, ICalAttendeeRole, ICalAttendeeStatus } from 'ical-generator';
import { getVtimezoneComponent } from '@touch4it/ical-timezones';
import nodeIcal from 'node-ical';

const input = JSON.parse(await new Promise((resolve) => {
  let s = '';
  process.stdin.on('data', (d) => { s += d; });
  process.stdin.on('end', () => resolve(s));
}));

function make(inv) {
  const cal = ical({ prodId: { company: 'mailbox-mcp tests', product: 'ical-generator' }, method: ICalCalendarMethod[inv.method || 'REQUEST'] });
  cal.timezone({ name: inv.timezone, generator: getVtimezoneComponent });
  const event = cal.createEvent({
    id: inv.uid,
    sequence: inv.sequence || 0,
    // Wall-clock times in the zone: ical-generator writes them with TZID.
    start: inv.start,
    end: inv.end,
    timezone: inv.timezone,
    summary: inv.summary,
    location: inv.location,
    description: inv.description,
    url: inv.url,
    organizer: inv.organizer,
    repeating: inv.weekly ? { freq: ICalEventRepeatingFreq.WEEKLY, count: inv.weekly.count, byDay: inv.weekly.byDay } : undefined,
  });
  for (const a of inv.attendees) {
    event.createAttendee({ name: a.name, email: a.email, rsvp: true, role: ICalAttendeeRole.REQ, status: ICalAttendeeStatus.NEEDSACTION });
  }
  return cal.toString();
}

function attendees(v) {
  if (!v) return [];
  return (Array.isArray(v) ? v : [v]).map((a) => ({
    email: String(a.val || a).replace(/^mailto:/i, ''),
    partstat: a.params?.PARTSTAT || '',
    cn: a.params?.CN || '',
  }));
}

function parse(text) {
  const data = nodeIcal.sync.parseICS(text);
  const out = { method: '', events: [] };
  for (const [key, v] of Object.entries(data)) {
    if (v.type === 'VCALENDAR' || key === 'vcalendar') {
      out.method = v.method || out.method;
      continue;
    }
    if (v.type !== 'VEVENT') continue;
    out.events.push({
      uid: v.uid,
      sequence: v.sequence === undefined ? null : Number(v.sequence),
      summary: typeof v.summary === 'object' ? v.summary.val : v.summary,
      start: v.start ? new Date(v.start).toISOString() : '',
      organizer: v.organizer ? String(v.organizer.val || v.organizer).replace(/^mailto:/i, '') : '',
      attendees: attendees(v.attendee),
      comment: typeof v.comment === 'object' ? v.comment.val : (v.comment || ''),
    });
  }
  return out;
}

process.stdout.write(JSON.stringify({
  made: (input.make || []).map(make),
  parsed: (input.parse || []).map(parse),
}));
