//! The tool lists one turn sends with and without deferred tools, for counting their tokens.
//!
//! Generates, deterministically (a fixed seed and the small PRNG below), 500 run-time tools in 25 domains
//! (`billing.invoice.refund`, `incidents.alert.acknowledge`, ...): 1–3 sentence descriptions, 1–10 documented
//! parameters with enums, optional fields, nested objects, arrays of objects and string formats, and a result
//! schema (which only the MCP list carries). Then renders, for every provider format, three lists:
//!
//! - `full`: all 500 tools, nothing deferred;
//! - `deferred`: 8 general tools kept listed, the other 492 deferred, plus keel's `search_tools`; what a turn is
//!   shown before any search (`view.shown(&Surfaced::new())`);
//! - `searched`: the same after one search surfaced 3 tools (the search tool itself is run, through an
//!   [`Executor`], on a fixed query, and the 3 tools it returns are the surfaced ones).
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example deferral_tokens > target/deferral-lists.json
//! ```
//!
//! Prints one JSON document: the generated registry's figures, the names kept and surfaced, and per provider
//! label (`openai-chat`, `anthropic`, ...) each list's compact JSON text, exactly as
//! `view.tool_list(provider).to_json()` makes it (the value of the request's tools array).
//! `bench/python/deferral_tokens.py` counts their tokens.

use std::collections::BTreeSet;
use std::sync::Arc;

use keel_tools_core::deferral::{SEARCH_TOOL, Surfaced};
use keel_tools_core::definition::{DynHandler, Effect, ToolDefinition};
use keel_tools_core::{CallContext, Executor, Provider, ToolCall, ToolView};
use serde_json::{Map, Value, json};

/// The tools kept listed when the rest are deferred: the most general ones, used in most conversations.
const CORE: [&str; 8] = [
    "identity.user.get",
    "crm.contact.search",
    "support.ticket.create",
    "calendar.event.create",
    "docs.document.search",
    "messaging.message.send",
    "projects.task.create",
    "analytics.report.run",
];

/// The query of the one search the `searched` list follows, and how many tools it surfaces.
const SEARCH_QUERY: &str = "refund part of a customer's invoice";
const SURFACED: u64 = 3;

const SEED: u64 = 0x6b65_656c_2d74_6f6b;

/// SplitMix64: small, fast, and the same sequence on every platform.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One resource of a domain: its name, its statuses, its attributes (`name:kind`, `!` after the name marks one
/// required on create), and its own action (`verb`, a sentence saying what it does, its effect, its parameters).
struct Resource {
    name: &'static str,
    statuses: &'static [&'static str],
    attrs: &'static [&'static str],
    verb: &'static str,
    verb_doc: &'static str,
    verb_effect: Effect,
    verb_params: &'static [&'static str],
}

struct Domain {
    name: &'static str,
    resources: [Resource; 4],
}

const fn r(
    name: &'static str,
    statuses: &'static [&'static str],
    attrs: &'static [&'static str],
    verb: (&'static str, &'static str, Effect, &'static [&'static str]),
) -> Resource {
    Resource { name, statuses, attrs, verb: verb.0, verb_doc: verb.1, verb_effect: verb.2, verb_params: verb.3 }
}

use Effect::{Destructive as D, Read as R, Write as W};

#[rustfmt::skip]
const DOMAINS: [Domain; 25] = [
    Domain { name: "billing", resources: [
        r("invoice", &["draft", "open", "paid", "void", "uncollectible"], &["customer_id!:id", "billing_email!:email", "due_date!:date", "line_items!:lines", "currency:currency", "memo:text", "po_number:str"],
          ("refund", "Refunds a paid invoice, fully or in part, to the original payment method.", W, &["amount:money", "reason!:enum(duplicate|fraudulent|requested_by_customer|service_not_rendered)", "notify_customer:bool", "note:text"])),
        r("payment", &["pending", "succeeded", "failed", "disputed"], &["invoice_id!:id", "amount!:money", "method!:enum(card|bank_transfer|direct_debit|wallet)", "received_at:datetime", "reference:str"],
          ("retry", "Retries a failed payment with the customer's current default payment method.", W, &["max_attempts:int(1-5)", "delay_hours:int(0-72)"])),
        r("subscription", &["trialing", "active", "past_due", "paused", "canceled"], &["customer_id!:id", "plan!:enum(starter|team|business|enterprise)", "seats!:int(1-10000)", "billing_cycle:enum(monthly|quarterly|yearly)", "trial_ends_at:datetime", "discount_percent:pct"],
          ("cancel", "Cancels a subscription now or at the end of the current period.", D, &["at_period_end!:bool", "reason:enum(too_expensive|missing_features|switched_service|unused|other)", "feedback:text"])),
        r("credit_note", &["issued", "applied", "void"], &["invoice_id!:id", "amount!:money", "reason!:enum(discount|correction|goodwill|return)", "memo:text"],
          ("apply", "Applies an issued credit note to one or more open invoices of the same customer.", W, &["invoice_ids!:ids", "amount:money"])),
    ]},
    Domain { name: "incidents", resources: [
        r("incident", &["triggered", "acknowledged", "investigating", "mitigated", "resolved"], &["title!:str", "severity!:enum(sev1|sev2|sev3|sev4)", "service_id!:id", "summary:text", "commander_email:email", "started_at:datetime", "impact:enum(none|minor|major|critical)", "responders:people"],
          ("escalate", "Escalates an incident to the next level of its escalation policy and pages the responders there.", W, &["level:int(1-5)", "message:text", "urgency!:enum(high|low)"])),
        r("alert", &["firing", "acknowledged", "resolved", "suppressed"], &["source!:enum(prometheus|datadog|cloudwatch|custom)", "fingerprint!:str", "labels:kv", "starts_at:datetime", "runbook_url:url"],
          ("acknowledge", "Acknowledges an alert so its notifications stop while someone looks at it.", W, &["acknowledged_by!:email", "snooze_minutes:int(0-1440)", "comment:text"])),
        r("postmortem", &["draft", "in_review", "published"], &["incident_id!:id", "owner_email!:email", "timeline:events", "root_cause:text", "action_items:tasks", "published_at:datetime"],
          ("publish", "Publishes a postmortem to the whole organisation and notifies the incident's subscribers.", W, &["audience:enum(team|engineering|company|public)", "notify:bool"])),
        r("on_call_shift", &["scheduled", "active", "ended"], &["schedule_id!:id", "user_email!:email", "starts_at!:datetime", "ends_at!:datetime", "layer:int(1-10)"],
          ("swap", "Swaps an on-call shift with another responder of the same schedule.", W, &["with_user_email!:email", "window!:range", "note:text"])),
    ]},
    Domain { name: "crm", resources: [
        r("contact", &["lead", "prospect", "customer", "churned"], &["first_name!:str", "last_name!:str", "email!:email", "phone:phone", "company_id:id", "job_title:str", "address:address", "tags:tags"],
          ("merge", "Merges duplicate contacts into one, keeping the activity history of each.", D, &["duplicate_ids!:ids", "prefer:enum(newest|oldest|most_complete)"])),
        r("account", &["active", "at_risk", "churned"], &["name!:str", "domain!:str", "industry:enum(software|retail|finance|healthcare|manufacturing|education|other)", "employees:int(1-1000000)", "owner_email:email", "billing_address:address", "annual_revenue:money"],
          ("transfer", "Transfers an account and its open deals to another owner.", W, &["new_owner_email!:email", "include_open_deals:bool", "note:text"])),
        r("deal", &["qualification", "proposal", "negotiation", "won", "lost"], &["account_id!:id", "title!:str", "amount!:money", "close_date:date", "probability:pct", "products:lines", "owner_email:email"],
          ("close", "Marks a deal won or lost and records why.", W, &["outcome!:enum(won|lost)", "lost_reason:enum(price|timing|competitor|no_budget|no_decision)", "closed_at:datetime"])),
        r("activity", &["planned", "done", "canceled"], &["kind!:enum(call|email|meeting|note)", "subject!:str", "contact_ids:ids", "due_at:datetime", "body:text", "duration_minutes:int(1-600)"],
          ("complete", "Marks a planned activity done and records its outcome.", W, &["outcome:enum(connected|left_voicemail|no_answer|rescheduled)", "notes:text"])),
    ]},
    Domain { name: "shipping", resources: [
        r("shipment", &["created", "label_printed", "in_transit", "delivered", "exception"], &["order_id!:id", "from_address!:address", "to_address!:address", "parcels!:parcels", "service_level:enum(ground|express|overnight|economy)", "ship_date:date", "insurance:money"],
          ("track", "Returns the carrier's tracking events for a shipment, newest first.", R, &["carrier:enum(ups|fedex|dhl|usps|dpd)", "since:datetime"])),
        r("parcel", &["packed", "handed_over", "lost"], &["shipment_id!:id", "weight_grams!:int(1-70000)", "dimensions!:dims", "contents:text", "hazardous:bool"],
          ("relabel", "Prints a new label for a parcel whose label was damaged or lost.", W, &["format:enum(pdf|zpl|png)", "reason!:enum(damaged|lost|address_change)"])),
        r("carrier_rate", &["quoted", "expired"], &["from_country!:country", "to_country!:country", "weight_grams!:int(1-70000)", "dimensions:dims", "service_level:enum(ground|express|overnight|economy)"],
          ("compare", "Compares carrier rates for a parcel and returns them cheapest first.", R, &["carriers:enum_list(ups|fedex|dhl|usps|dpd)", "max_transit_days:int(1-30)", "currency:currency"])),
        r("return_label", &["issued", "used", "expired"], &["shipment_id!:id", "reason!:enum(damaged|wrong_item|not_needed|defective|other)", "items:lines", "refund_method:enum(original|store_credit|exchange)"],
          ("void", "Voids an unused return label so it can no longer be scanned.", D, &["note:text"])),
    ]},
    Domain { name: "hr", resources: [
        r("employee", &["onboarding", "active", "on_leave", "terminated"], &["first_name!:str", "last_name!:str", "work_email!:email", "start_date!:date", "department:enum(engineering|sales|marketing|finance|operations|people)", "manager_id:id", "home_address:address", "employment_type:enum(full_time|part_time|contractor|intern)"],
          ("offboard", "Starts the offboarding checklist for an employee: access removal, equipment return, final pay.", D, &["last_day!:date", "reason!:enum(resignation|termination|retirement|contract_end)", "rehire_eligible:bool", "notes:text"])),
        r("leave_request", &["pending", "approved", "rejected", "canceled"], &["employee_id!:id", "kind!:enum(vacation|sick|parental|unpaid|bereavement)", "period!:range", "half_day:bool", "comment:text"],
          ("approve", "Approves or rejects a pending leave request and tells the employee.", W, &["decision!:enum(approve|reject)", "comment:text"])),
        r("review", &["scheduled", "self_review", "manager_review", "completed"], &["employee_id!:id", "reviewer_email!:email", "cycle!:str", "ratings:ratings", "summary:text", "due_date:date"],
          ("submit", "Submits a completed review; it can no longer be edited afterwards.", W, &["acknowledge_by_employee:bool"])),
        r("position", &["draft", "open", "filled", "closed"], &["title!:str", "department!:enum(engineering|sales|marketing|finance|operations|people)", "level:enum(junior|mid|senior|staff|principal)", "salary_range:salary", "location:enum(remote|hybrid|onsite)", "headcount:int(1-50)"],
          ("close", "Closes a position so no more candidates can be hired into it.", W, &["reason!:enum(filled|canceled|budget|reorg)"])),
    ]},
    Domain { name: "inventory", resources: [
        r("item", &["active", "discontinued", "backordered"], &["sku!:str", "name!:str", "unit_cost:money", "reorder_point:int(0-100000)", "barcode:str", "weight_grams:int(0-100000)", "dimensions:dims", "tags:tags"],
          ("discontinue", "Discontinues an item: it stays in history but can no longer be ordered.", D, &["effective_date!:date", "replacement_sku:str"])),
        r("stock_level", &["ok", "low", "out"], &["item_id!:id", "warehouse_id!:id", "on_hand!:int(0-1000000)", "reserved:int(0-1000000)", "bin:str"],
          ("adjust", "Adjusts the stock on hand of an item in one warehouse and records why.", W, &["delta!:int(-100000-100000)", "reason!:enum(count|damage|theft|found|return)", "note:text"])),
        r("warehouse", &["active", "inactive"], &["code!:str", "name!:str", "address!:address", "timezone:str", "capacity_pallets:int(0-100000)", "manager_email:email"],
          ("audit", "Schedules a full cycle count of a warehouse.", W, &["date!:date", "zones:tags", "blind_count:bool"])),
        r("transfer", &["requested", "in_transit", "received", "canceled"], &["from_warehouse_id!:id", "to_warehouse_id!:id", "lines!:lines", "expected_at:datetime", "carrier:enum(ups|fedex|dhl|usps|dpd|own_fleet)"],
          ("receive", "Records the receipt of a transfer, line by line, with any discrepancies.", W, &["received_lines!:lines", "received_at:datetime", "note:text"])),
    ]},
    Domain { name: "support", resources: [
        r("ticket", &["new", "open", "pending", "solved", "closed"], &["subject!:str", "requester_email!:email", "description!:text", "priority:enum(low|normal|high|urgent)", "channel:enum(email|chat|phone|web)", "assignee_email:email", "tags:tags", "attachments:files"],
          ("assign", "Assigns a ticket to an agent or a group and notifies them.", W, &["assignee_email:email", "group:enum(tier1|tier2|billing|technical|vip)", "internal_note:text"])),
        r("macro", &["active", "inactive"], &["title!:str", "body!:text", "actions:kv", "visibility:enum(personal|group|everyone)"],
          ("apply", "Applies a macro to a ticket: sets its fields and drafts its reply.", W, &["ticket_id!:id", "send_reply:bool"])),
        r("satisfaction_survey", &["sent", "answered", "expired"], &["ticket_id!:id", "score:int(1-5)", "comment:text", "sent_at:datetime"],
          ("resend", "Sends a satisfaction survey again to a requester who has not answered.", W, &["channel:enum(email|sms)"])),
        r("sla_policy", &["active", "inactive"], &["name!:str", "first_reply_minutes!:int(1-10080)", "resolution_minutes!:int(1-43200)", "priorities:enum_list(low|normal|high|urgent)", "business_hours_only:bool"],
          ("simulate", "Computes which tickets of the last 30 days would have breached a policy.", R, &["window:range", "group:enum(tier1|tier2|billing|technical|vip)"])),
    ]},
    Domain { name: "marketing", resources: [
        r("campaign", &["draft", "scheduled", "running", "paused", "finished"], &["name!:str", "channel!:enum(email|sms|push|social|ads)", "segment_id!:id", "budget:money", "window:range", "goal:enum(awareness|signups|revenue|retention)"],
          ("launch", "Launches a scheduled campaign now instead of at its start time.", W, &["send_test_to:emails", "throttle_per_hour:int(100-1000000)"])),
        r("segment", &["building", "ready", "stale"], &["name!:str", "rules!:rules", "description:text", "refresh:enum(hourly|daily|weekly|manual)"],
          ("estimate", "Estimates how many contacts a segment holds right now.", R, &["include_unsubscribed:bool"])),
        r("email_template", &["draft", "approved", "archived"], &["name!:str", "subject!:str", "html_body!:text", "text_body:text", "locale:enum(en|de|fr|es|it|ja|pt)", "from_email:email"],
          ("preview", "Renders a template with sample data and returns the HTML and text.", R, &["contact_id:id", "variables:kv"])),
        r("landing_page", &["draft", "published", "unpublished"], &["title!:str", "slug!:str", "blocks:blocks", "seo_description:text", "campaign_id:id"],
          ("publish", "Publishes a landing page at its slug under the marketing domain.", W, &["schedule_at:datetime"])),
    ]},
    Domain { name: "calendar", resources: [
        r("event", &["tentative", "confirmed", "canceled"], &["title!:str", "window!:range", "attendees:people", "location:str", "room_id:id", "description:text", "recurrence:recurrence", "visibility:enum(default|public|private)"],
          ("reschedule", "Moves an event to a new time and notifies the attendees.", W, &["window!:range", "notify_attendees:bool", "message:text"])),
        r("room", &["available", "maintenance"], &["name!:str", "building!:str", "capacity!:int(1-500)", "equipment:enum_list(projector|whiteboard|video_conference|phone)", "floor:int(-5-200)"],
          ("book", "Books a room for a time window if it is free then.", W, &["window!:range", "organizer_email!:email", "title:str"])),
        r("availability", &["computed"], &["emails!:emails", "window!:range", "timezone:str", "working_hours_only:bool"],
          ("suggest", "Suggests meeting times when every attendee is free.", R, &["emails!:emails", "duration_minutes!:int(5-480)", "window!:range", "max_suggestions:int(1-20)"])),
        r("reminder", &["scheduled", "sent", "canceled"], &["event_id!:id", "minutes_before!:int(0-40320)", "method:enum(email|popup|sms)"],
          ("snooze", "Snoozes a reminder that has fired.", W, &["minutes!:int(1-1440)"])),
    ]},
    Domain { name: "docs", resources: [
        r("document", &["draft", "published", "archived"], &["title!:str", "folder_id!:id", "content!:text", "format:enum(markdown|html|plain)", "labels:tags", "owner_email:email"],
          ("translate", "Translates a document into another language and saves it as a new document.", W, &["target_locale!:enum(en|de|fr|es|it|ja|pt)", "keep_formatting:bool"])),
        r("folder", &["active", "trashed"], &["name!:str", "parent_id:id", "color:enum(gray|red|orange|green|blue|purple)", "description:text"],
          ("move", "Moves a folder, with everything in it, under another parent folder.", W, &["new_parent_id!:id"])),
        r("comment", &["open", "resolved"], &["document_id!:id", "body!:text", "anchor:anchor", "mentions:emails"],
          ("resolve", "Resolves a comment thread on a document.", W, &["reply:text"])),
        r("share_link", &["active", "revoked"], &["document_id!:id", "access!:enum(view|comment|edit)", "expires_at:datetime", "password_protected:bool", "allowed_domains:tags"],
          ("revoke", "Revokes a share link; anyone holding it loses access at once.", D, &["reason:text"])),
    ]},
    Domain { name: "analytics", resources: [
        r("report", &["queued", "running", "ready", "failed"], &["name!:str", "metrics!:enum_list(revenue|signups|active_users|churn|conversion|sessions)", "dimensions:enum_list(day|week|month|country|plan|channel)", "window!:range", "filters:filters"],
          ("run", "Runs a report over a time window and returns its rows.", R, &["metrics!:enum_list(revenue|signups|active_users|churn|conversion|sessions)", "window!:range", "group_by:enum_list(day|week|month|country|plan|channel)", "filters:filters", "limit:int(1-10000)"])),
        r("dashboard", &["active", "archived"], &["title!:str", "widgets:widgets", "shared_with:emails", "refresh_minutes:int(1-1440)"],
          ("snapshot", "Renders a dashboard to a PDF or PNG at its current state.", R, &["format!:enum(pdf|png)", "width_px:int(320-4096)"])),
        r("metric", &["active", "deprecated"], &["key!:str", "description!:text", "aggregation!:enum(sum|count|avg|min|max|p95)", "unit:enum(count|seconds|bytes|currency|percent)", "owner_email:email"],
          ("backfill", "Recomputes a metric's history for a past window.", W, &["window!:range", "priority:enum(low|normal|high)"])),
        r("export_job", &["queued", "running", "done", "failed"], &["report_id!:id", "format!:enum(csv|parquet|xlsx|json)", "destination:destination", "compress:bool"],
          ("cancel", "Cancels a queued or running export job.", W, &["reason:text"])),
    ]},
    Domain { name: "identity", resources: [
        r("user", &["invited", "active", "suspended", "deactivated"], &["email!:email", "display_name!:str", "role:enum(member|admin|owner|guest)", "groups:ids", "locale:enum(en|de|fr|es|it|ja|pt)", "timezone:str"],
          ("suspend", "Suspends a user: their sessions end and they can no longer sign in.", D, &["reason!:enum(security|policy|offboarding|other)", "until:datetime", "notify:bool"])),
        r("group", &["active", "archived"], &["name!:str", "description:text", "members:emails", "managed_by:enum(manual|scim|rule)"],
          ("sync", "Synchronises a group's members from the directory now.", W, &["dry_run:bool"])),
        r("role", &["active", "deprecated"], &["name!:str", "permissions!:permissions", "description:text"],
          ("grant", "Grants a role to users or groups, optionally for a limited time.", W, &["user_emails:emails", "group_ids:ids", "expires_at:datetime", "justification!:text"])),
        r("api_key", &["active", "revoked", "expired"], &["name!:str", "scopes!:enum_list(read|write|admin|billing|audit)", "expires_at:datetime", "ip_allowlist:tags"],
          ("rotate", "Rotates an API key: issues a new secret and expires the old one after a grace period.", W, &["grace_minutes:int(0-10080)"])),
    ]},
    Domain { name: "procurement", resources: [
        r("purchase_order", &["draft", "submitted", "approved", "received", "closed"], &["vendor_id!:id", "lines!:lines", "ship_to!:address", "needed_by:date", "cost_center:str", "notes:text"],
          ("approve", "Approves a submitted purchase order within the approver's spending limit.", W, &["comment:text", "limit_override:bool"])),
        r("vendor", &["onboarding", "approved", "blocked"], &["name!:str", "tax_id!:str", "contact_email!:email", "address:address", "payment_terms:enum(net15|net30|net60|due_on_receipt)", "bank_account:bank"],
          ("block", "Blocks a vendor: no new purchase orders can be raised against it.", D, &["reason!:text", "until:date"])),
        r("requisition", &["draft", "pending", "approved", "rejected"], &["requester_email!:email", "items!:lines", "justification!:text", "budget_code:str", "urgency:enum(low|normal|high)"],
          ("convert", "Converts an approved requisition into a purchase order for a vendor.", W, &["vendor_id!:id", "split_by_vendor:bool"])),
        r("contract", &["draft", "active", "expired", "terminated"], &["vendor_id!:id", "title!:str", "term!:range", "value:money", "auto_renew:bool", "documents:files"],
          ("renew", "Renews a contract for another term, optionally with a new value.", W, &["term_months!:int(1-120)", "new_value:money"])),
    ]},
    Domain { name: "accounting", resources: [
        r("journal_entry", &["draft", "posted", "reversed"], &["date!:date", "lines!:journal_lines", "memo:text", "source:enum(manual|import|system)"],
          ("reverse", "Reverses a posted journal entry with an opposite entry on a given date.", D, &["reversal_date!:date", "memo:text"])),
        r("ledger_account", &["active", "inactive"], &["code!:str", "name!:str", "kind!:enum(asset|liability|equity|income|expense)", "currency:currency", "parent_code:str"],
          ("balance", "Returns an account's balance at a date, with its opening and closing figures.", R, &["as_of!:date", "include_children:bool"])),
        r("expense", &["submitted", "approved", "reimbursed", "rejected"], &["employee_id!:id", "amount!:money", "category!:enum(travel|meals|software|equipment|training|other)", "incurred_on!:date", "receipt:files", "merchant:str"],
          ("reimburse", "Reimburses approved expenses in the next payroll or by bank transfer.", W, &["method!:enum(payroll|bank_transfer)", "pay_date:date"])),
        r("tax_rate", &["active", "archived"], &["name!:str", "percent!:pct", "country!:country", "region:str", "inclusive:bool"],
          ("calculate", "Calculates the tax on an amount for a place and product category.", R, &["amount!:money", "ship_to!:address", "category:enum(goods|services|digital|food)"])),
    ]},
    Domain { name: "devops", resources: [
        r("deployment", &["pending", "running", "succeeded", "failed", "rolled_back"], &["service!:str", "version!:str", "environment!:enum(dev|staging|production)", "strategy:enum(rolling|blue_green|canary)", "commit_sha:str", "triggered_by:email"],
          ("rollback", "Rolls a deployment back to the previous successful version.", D, &["to_version:str", "reason!:text"])),
        r("pipeline", &["idle", "running", "failed", "passed"], &["repository!:str", "branch!:str", "stages:stages", "variables:kv"],
          ("trigger", "Starts a pipeline run on a branch or commit.", W, &["ref!:str", "variables:kv", "skip_tests:bool"])),
        r("environment", &["provisioning", "ready", "destroyed"], &["name!:str", "region!:enum(us_east|us_west|eu_west|eu_central|ap_south)", "size:enum(small|medium|large)", "ttl_hours:int(1-720)", "variables:kv"],
          ("destroy", "Destroys an environment and everything running in it.", D, &["confirm_name!:str"])),
        r("feature_flag", &["off", "on", "rollout"], &["key!:str", "description:text", "rollout_percent:pct", "targeting:rules", "environments:enum_list(dev|staging|production)"],
          ("toggle", "Turns a feature flag on or off in one environment.", W, &["environment!:enum(dev|staging|production)", "enabled!:bool", "comment:text"])),
    ]},
    Domain { name: "security", resources: [
        r("vulnerability", &["open", "triaged", "fixed", "accepted"], &["cve:str", "severity!:enum(low|medium|high|critical)", "asset_ids!:ids", "cvss:num", "found_at:datetime", "scanner:enum(snyk|trivy|dependabot|manual)"],
          ("accept_risk", "Accepts the risk of a vulnerability until a date, with a justification.", W, &["until!:date", "justification!:text", "approver_email!:email"])),
        r("audit_log", &["recorded"], &["actor_email:email", "action:str", "target:str", "window:range", "ip:str"],
          ("export", "Exports audit log entries for a window to a file.", R, &["window!:range", "format:enum(csv|json)", "actions:tags"])),
        r("policy", &["draft", "enforced", "disabled"], &["name!:str", "rules!:rules", "scope:enum(org|team|project)", "severity:enum(info|warn|block)"],
          ("evaluate", "Evaluates a policy against a resource and returns the rules it breaks.", R, &["resource_type!:enum(repository|bucket|user|deployment)", "resource_id!:id"])),
        r("secret", &["active", "rotating", "revoked"], &["name!:str", "value!:str", "environment:enum(dev|staging|production)", "rotation_days:int(1-365)", "owners:emails"],
          ("rotate", "Rotates a secret's value and restarts the services that read it.", W, &["restart_services:bool", "new_value:str"])),
    ]},
    Domain { name: "storage", resources: [
        r("bucket", &["active", "deleting"], &["name!:str", "region!:enum(us_east|us_west|eu_west|eu_central|ap_south)", "versioning:bool", "encryption:enum(none|managed|customer_key)", "public_access:bool", "labels:kv"],
          ("empty", "Deletes every object of a bucket, keeping the bucket.", D, &["confirm_name!:str", "include_versions:bool"])),
        r("object", &["stored", "archived"], &["bucket!:str", "key!:str", "content_type:str", "size_bytes:int(0-5000000000)", "metadata:kv", "storage_class:enum(standard|infrequent|archive)"],
          ("copy", "Copies an object to another bucket or key.", W, &["to_bucket!:str", "to_key!:str", "overwrite:bool"])),
        r("snapshot", &["creating", "available", "deleting"], &["volume_id!:id", "description:text", "retention_days:int(1-3650)", "tags:tags"],
          ("restore", "Restores a snapshot to a new volume.", W, &["zone!:str", "volume_type:enum(ssd|hdd|throughput)"])),
        r("lifecycle_rule", &["enabled", "disabled"], &["bucket!:str", "prefix:str", "transitions!:transitions", "expire_after_days:int(1-36500)"],
          ("dry_run", "Lists the objects a lifecycle rule would transition or expire today.", R, &["limit:int(1-1000)"])),
    ]},
    Domain { name: "messaging", resources: [
        r("channel", &["active", "archived"], &["name!:str", "topic:str", "private:bool", "members:emails", "retention_days:int(1-3650)"],
          ("archive", "Archives a channel: it becomes read-only and leaves the sidebar.", D, &["announce:bool"])),
        r("message", &["sent", "edited", "deleted"], &["channel_id!:id", "text!:text", "thread_id:id", "attachments:files", "mentions:emails"],
          ("send", "Sends a message to a channel or a person, optionally in a thread or at a later time.", W, &["to!:str", "text!:text", "thread_id:id", "attachments:files", "send_at:datetime", "priority:enum(normal|important|urgent)"])),
        r("thread", &["open", "resolved"], &["channel_id!:id", "root_message_id!:id", "followers:emails"],
          ("summarize", "Summarises a thread's messages in a few sentences.", R, &["max_sentences:int(1-10)", "language:enum(en|de|fr|es|it|ja|pt)"])),
        r("webhook", &["active", "failing", "disabled"], &["url!:url", "events!:enum_list(message_created|message_edited|channel_created|member_joined)", "secret:str", "channel_id:id"],
          ("test", "Sends a test event to a webhook and returns the response it got.", W, &["event:enum(message_created|message_edited|channel_created|member_joined)"])),
    ]},
    Domain { name: "projects", resources: [
        r("project", &["planned", "active", "on_hold", "done"], &["name!:str", "owner_email!:email", "window:range", "budget:money", "visibility:enum(private|team|org)", "description:text"],
          ("archive", "Archives a finished project and everything in it.", D, &["keep_tasks_open:bool"])),
        r("task", &["todo", "in_progress", "blocked", "done"], &["project_id!:id", "title!:str", "assignee_email:email", "due_date:date", "priority:enum(low|medium|high|urgent)", "description:text", "checklist:checklist", "labels:tags"],
          ("reassign", "Gives a task to someone else, with a note to them.", W, &["assignee_email!:email", "note:text"])),
        r("milestone", &["upcoming", "reached", "missed"], &["project_id!:id", "name!:str", "due_date!:date", "deliverables:tags"],
          ("shift", "Moves a milestone, and optionally its dependent tasks, by some days.", W, &["days!:int(-365-365)", "move_dependents:bool"])),
        r("time_entry", &["draft", "submitted", "approved"], &["task_id!:id", "user_email!:email", "minutes!:int(1-1440)", "date!:date", "billable:bool", "note:text"],
          ("submit", "Submits a week of time entries for approval.", W, &["week_of!:date"])),
    ]},
    Domain { name: "recruiting", resources: [
        r("candidate", &["applied", "screening", "interviewing", "offer", "hired", "rejected"], &["first_name!:str", "last_name!:str", "email!:email", "phone:phone", "resume:files", "source:enum(referral|job_board|agency|career_site|sourced)", "posting_id:id"],
          ("advance", "Moves a candidate to the next stage of the hiring process.", W, &["to_stage!:enum(screening|interviewing|offer|hired)", "note:text", "notify_candidate:bool"])),
        r("job_posting", &["draft", "open", "paused", "closed"], &["title!:str", "position_id!:id", "description!:text", "location:enum(remote|hybrid|onsite)", "salary_range:salary", "boards:enum_list(linkedin|indeed|glassdoor|career_site)"],
          ("syndicate", "Publishes a job posting on external job boards.", W, &["boards!:enum_list(linkedin|indeed|glassdoor|career_site)", "budget:money"])),
        r("interview", &["scheduled", "done", "canceled", "no_show"], &["candidate_id!:id", "interviewers!:emails", "window!:range", "kind:enum(phone|video|onsite|take_home)", "scorecard:ratings"],
          ("feedback", "Records an interviewer's feedback and recommendation.", W, &["interviewer_email!:email", "recommendation!:enum(strong_no|no|yes|strong_yes)", "notes:text"])),
        r("offer", &["draft", "sent", "accepted", "declined", "expired"], &["candidate_id!:id", "salary!:money", "start_date!:date", "equity_units:int(0-1000000)", "expires_at:datetime"],
          ("send", "Sends an offer letter to the candidate for signature.", W, &["message:text", "cc:emails"])),
    ]},
    Domain { name: "legal", resources: [
        r("agreement", &["draft", "in_review", "signed", "expired"], &["title!:str", "counterparty!:str", "kind!:enum(nda|msa|dpa|sow|order_form)", "term:range", "value:money", "governing_law:country"],
          ("redline", "Compares two versions of an agreement and returns the changes.", R, &["base_version!:int(1-1000)", "compare_version!:int(1-1000)"])),
        r("clause", &["approved", "deprecated"], &["title!:str", "text!:text", "category!:enum(liability|confidentiality|termination|payment|ip|privacy)", "fallbacks:tags"],
          ("suggest", "Suggests approved clauses that fit an agreement's context.", R, &["agreement_id!:id", "category:enum(liability|confidentiality|termination|payment|ip|privacy)"])),
        r("signature_request", &["sent", "partially_signed", "completed", "declined"], &["agreement_id!:id", "signers!:people", "message:text", "expires_at:datetime"],
          ("remind", "Reminds the signers who have not signed yet.", W, &["message:text"])),
        r("matter", &["open", "on_hold", "closed"], &["title!:str", "kind!:enum(litigation|compliance|contract|employment|ip)", "lead_counsel:email", "budget:money", "opened_on:date"],
          ("hold", "Places a legal hold on the data of the people a matter involves.", W, &["custodians!:emails", "scope!:enum_list(email|chat|documents|devices)", "notice:text"])),
    ]},
    Domain { name: "fleet", resources: [
        r("vehicle", &["available", "in_use", "maintenance", "retired"], &["plate!:str", "vin!:str", "model!:str", "kind:enum(van|truck|car|bike)", "odometer_km:int(0-2000000)", "depot_id:id"],
          ("locate", "Returns a vehicle's last known position and speed.", R, &["max_age_seconds:int(0-86400)"])),
        r("driver", &["active", "off_duty", "suspended"], &["name!:str", "license_number!:str", "license_expires!:date", "phone:phone", "depot_id:id"],
          ("assign_vehicle", "Assigns a vehicle to a driver for a shift.", W, &["vehicle_id!:id", "window!:range"])),
        r("trip", &["planned", "underway", "completed", "canceled"], &["vehicle_id!:id", "driver_id!:id", "stops!:stops", "departure_at:datetime", "notes:text"],
          ("optimize", "Reorders a trip's stops to shorten the route while keeping time windows.", W, &["objective:enum(distance|time|fuel)", "keep_first_stop:bool"])),
        r("maintenance_order", &["open", "scheduled", "done"], &["vehicle_id!:id", "kind!:enum(service|repair|inspection|tires)", "due_date:date", "description:text", "cost:money"],
          ("complete", "Closes a maintenance order with its parts, labour and cost.", W, &["parts:lines", "labour_hours:num", "cost!:money"])),
    ]},
    Domain { name: "payroll", resources: [
        r("pay_run", &["draft", "calculated", "approved", "paid"], &["period!:range", "pay_date!:date", "group:enum(monthly|biweekly|weekly|contractors)", "notes:text"],
          ("finalize", "Approves a calculated pay run and sends the payments to the bank.", D, &["approver_email!:email", "send_payslips:bool"])),
        r("payslip", &["draft", "issued"], &["pay_run_id!:id", "employee_id!:id", "gross:money", "net:money", "items:lines"],
          ("email", "Emails a payslip to the employee as a PDF.", W, &["to:email", "password_protect:bool"])),
        r("deduction", &["active", "ended"], &["employee_id!:id", "kind!:enum(pension|health|loan|garnishment|union)", "amount:money", "percent:pct", "window:range"],
          ("pause", "Pauses a recurring deduction for some pay periods.", W, &["periods!:int(1-24)", "reason:text"])),
        r("bonus", &["proposed", "approved", "paid"], &["employee_id!:id", "amount!:money", "kind!:enum(performance|signing|retention|referral|spot)", "pay_date:date", "reason:text"],
          ("approve", "Approves a proposed bonus for payment in the next pay run.", W, &["comment:text"])),
    ]},
    Domain { name: "ecommerce", resources: [
        r("order", &["pending", "paid", "fulfilled", "canceled", "refunded"], &["customer_email!:email", "lines!:lines", "shipping_address!:address", "billing_address:address", "coupon_code:str", "currency:currency", "notes:text"],
          ("fulfill", "Marks an order's lines as shipped and sends the tracking to the customer.", W, &["line_ids:ids", "tracking_number!:str", "carrier!:enum(ups|fedex|dhl|usps|dpd)", "notify_customer:bool"])),
        r("product", &["draft", "active", "archived"], &["title!:str", "price!:money", "sku:str", "description:text", "variants:variants", "images:files", "tags:tags"],
          ("reprice", "Changes a product's price, now or at a scheduled time.", W, &["price!:money", "compare_at_price:money", "effective_at:datetime"])),
        r("cart", &["open", "abandoned", "converted"], &["customer_email:email", "lines!:lines", "currency:currency"],
          ("recover", "Sends an abandoned-cart email with an optional discount.", W, &["discount_percent:pct", "template_id:id"])),
        r("coupon", &["active", "expired", "disabled"], &["code!:str", "percent_off:pct", "amount_off:money", "valid!:range", "max_redemptions:int(1-1000000)", "products:ids"],
          ("disable", "Disables a coupon so it can no longer be redeemed.", D, &["reason:text"])),
    ]},
    Domain { name: "facilities", resources: [
        r("work_order", &["open", "assigned", "in_progress", "done"], &["title!:str", "location!:location", "priority:enum(low|medium|high|emergency)", "category:enum(hvac|plumbing|electrical|cleaning|it|other)", "description:text", "photos:files"],
          ("dispatch", "Dispatches a technician to a work order.", W, &["technician_email!:email", "arrive_by:datetime", "note:text"])),
        r("asset", &["in_service", "broken", "disposed"], &["tag!:str", "kind!:enum(hvac|elevator|generator|printer|furniture|vehicle)", "location:location", "purchased_on:date", "warranty_until:date", "value:money"],
          ("dispose", "Records the disposal of an asset and removes it from the register.", D, &["method!:enum(sold|recycled|scrapped|donated)", "proceeds:money"])),
        r("booking", &["reserved", "checked_in", "canceled"], &["resource!:enum(desk|parking|locker|room)", "location!:location", "window!:range", "booked_for:email"],
          ("check_in", "Checks in to a booking; unconfirmed bookings are released after 15 minutes.", W, &["at:datetime"])),
        r("inspection", &["scheduled", "passed", "failed"], &["asset_id!:id", "kind!:enum(fire|electrical|safety|elevator)", "date!:date", "inspector:str", "findings:findings"],
          ("certify", "Issues the certificate of a passed inspection.", W, &["valid_until!:date", "certificate_number:str"])),
    ]},
];

/// A JSON Schema for one attribute kind; `noun` is the resource it belongs to.
fn kind_schema(kind: &str, human: &str, noun: &str, rng: &mut Prng) -> Value {
    let string = |fmt: Option<&str>, doc: String| {
        let mut s = json!({"type": "string", "description": doc});
        if let Some(f) = fmt {
            s["format"] = json!(f);
        }
        s
    };
    let money = |doc: String| {
        json!({
            "type": "object",
            "description": doc,
            "properties": {
                "amount_minor": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Amount in the currency's minor unit (cents for USD)."
                },
                "currency": {
                    "type": "string",
                    "enum": ["USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF"],
                    "description": "ISO 4217 currency code."
                }
            },
            "required": ["amount_minor", "currency"]
        })
    };
    let address = |doc: String| {
        json!({
            "type": "object",
            "description": doc,
            "properties": {
                "line1": {"type": "string", "description": "Street and number."},
                "line2": {"type": "string", "description": "Apartment, suite or floor."},
                "city": {"type": "string"},
                "postal_code": {"type": "string"},
                "region": {"type": "string", "description": "State, province or county."},
                "country": {
                    "type": "string",
                    "pattern": "^[A-Z]{2}$",
                    "description": "ISO 3166-1 alpha-2 country code."
                }
            },
            "required": ["line1", "city", "country"]
        })
    };
    let array_of = |doc: String, item: Value, max: u64| {
        json!({
            "type": "array",
            "description": doc,
            "items": item,
            "maxItems": max
        })
    };
    fn enum_of(values: &str) -> Vec<&str> {
        values.split('|').collect()
    }

    if let Some(inner) = kind.strip_prefix("enum(").and_then(|k| k.strip_suffix(')')) {
        let doc = rng
            .pick(&[
                format!("{human} of the {noun}."),
                format!("{human}."),
                format!("The {noun}'s {}.", human.to_lowercase()),
            ])
            .clone();
        return json!({"type": "string", "enum": enum_of(inner), "description": doc});
    }
    if let Some(inner) = kind.strip_prefix("enum_list(").and_then(|k| k.strip_suffix(')')) {
        return json!({
            "type": "array",
            "description": format!("{human}: one or more of the values listed."),
            "items": {"type": "string", "enum": enum_of(inner)},
            "uniqueItems": true
        });
    }
    if let Some(inner) = kind.strip_prefix("int(").and_then(|k| k.strip_suffix(')')) {
        // `a-b`, either bound possibly negative.
        let split = inner[1..].find('-').map(|i| i + 1).expect("int(a-b)");
        let (lo, hi) = (&inner[..split], &inner[split + 1..]);
        let lo: i64 = lo.parse().expect("lower bound");
        let hi: i64 = hi.parse().expect("upper bound");
        return json!({
            "type": "integer",
            "minimum": lo,
            "maximum": hi,
            "description": format!("{human} ({lo} to {hi}).")
        });
    }
    match kind {
        "id" => {
            let of = human.to_lowercase();
            let of = of.trim_end_matches(" id");
            json!({
                "type": "string",
                "pattern": "^[a-z]+_[A-Za-z0-9]{10,32}$",
                "description": format!("ID of the {of}, e.g. `{}_8fK2mQ9xLp`.", &of[..3.min(of.len())])
            })
        }
        "ids" => array_of(
            format!("{human}: IDs, at most 100."),
            json!({"type": "string", "pattern": "^[a-z]+_[A-Za-z0-9]{10,32}$"}),
            100,
        ),
        "str" => {
            json!({
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": format!("{human} of the {noun}.")
            })
        }
        "text" => {
            json!({
                "type": "string",
                "maxLength": 10000,
                "description": format!("{human}, free text (Markdown allowed).")
            })
        }
        "email" => string(Some("email"), format!("{human}: an email address.")),
        "emails" => array_of(format!("{human}: email addresses."), json!({"type": "string", "format": "email"}), 200),
        "url" => string(Some("uri"), format!("{human}: an absolute https URL.")),
        "phone" => {
            json!({
                "type": "string",
                "pattern": "^\\+[1-9][0-9]{6,14}$",
                "description": format!("{human} in E.164 form, e.g. +14155550123.")
            })
        }
        "date" => string(Some("date"), format!("{human} (YYYY-MM-DD).")),
        "datetime" => string(Some("date-time"), format!("{human} (RFC 3339 date-time; UTC if no offset is given).")),
        "bool" => {
            json!({
                "type": "boolean",
                "description": rng.pick(&[
                    format!("Whether to {}.", human.to_lowercase()),
                    format!("{human}; false if absent.")
                ]).clone()
            })
        }
        "num" => json!({"type": "number", "minimum": 0, "description": format!("{human}.")}),
        "pct" => {
            json!({
                "type": "number",
                "minimum": 0,
                "maximum": 100,
                "description": format!("{human}, as a percentage (0 to 100).")
            })
        }
        "currency" => {
            json!({
                "type": "string",
                "enum": ["USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF"],
                "description": format!("{human}: ISO 4217 code; the account's default if absent.")
            })
        }
        "country" => {
            json!({
                "type": "string",
                "pattern": "^[A-Z]{2}$",
                "description": format!("{human}: ISO 3166-1 alpha-2 code.")
            })
        }
        "money" => money(format!("{human}.")),
        "address" => address(format!("{human}.")),
        "tags" => array_of(format!("{human}: free-form labels."), json!({"type": "string", "maxLength": 50}), 50),
        "kv" => {
            json!({
                "type": "object",
                "description": format!("{human}: string keys and values."),
                "additionalProperties": {"type": "string", "maxLength": 500}
            })
        }
        "range" => json!({
            "type": "object",
            "description": format!("{human}: a time window."),
            "properties": {
                "start": {"type": "string", "format": "date-time", "description": "Start, inclusive."},
                "end": {"type": "string", "format": "date-time", "description": "End, exclusive."}
            },
            "required": ["start", "end"]
        }),
        "lines" | "journal_lines" => {
            let item = if kind == "lines" {
                json!({
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "description": "Stock keeping unit of the product."},
                        "description": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1, "description": "Units, at least 1."},
                        "unit_price": money("Price of one unit.".into()),
                        "tax_code": {"type": "string", "enum": ["standard", "reduced", "zero", "exempt"]}
                    },
                    "required": ["sku", "quantity"]
                })
            } else {
                json!({
                    "type": "object",
                    "properties": {
                        "account_code": {"type": "string", "description": "Ledger account code."},
                        "debit": money("Debit amount; leave out for a credit line.".into()),
                        "credit": money("Credit amount; leave out for a debit line.".into()),
                        "description": {"type": "string"}
                    },
                    "required": ["account_code"]
                })
            };
            array_of(format!("{human}: one entry per line, in order."), item, 500)
        }
        "people" => array_of(
            format!("{human}: people involved."),
            json!({
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "name": {"type": "string"},
                    "role": {
                        "type": "string",
                        "enum": ["required", "optional", "owner", "observer"],
                        "description": "Their role; `required` if absent."
                    }
                },
                "required": ["email"]
            }),
            100,
        ),
        "files" => array_of(
            format!("{human}: files already uploaded, by their upload ID."),
            json!({
                "type": "object",
                "properties": {
                    "upload_id": {"type": "string", "description": "ID returned by the upload endpoint."},
                    "filename": {"type": "string"},
                    "content_type": {"type": "string", "description": "MIME type, e.g. application/pdf."}
                },
                "required": ["upload_id"]
            }),
            20,
        ),
        "dims" => json!({
            "type": "object",
            "description": format!("{human} in centimetres."),
            "properties": {
                "length_cm": {"type": "number", "exclusiveMinimum": 0},
                "width_cm": {"type": "number", "exclusiveMinimum": 0},
                "height_cm": {"type": "number", "exclusiveMinimum": 0}
            },
            "required": ["length_cm", "width_cm", "height_cm"]
        }),
        "parcels" => array_of(
            format!("{human} of the {noun}."),
            json!({
                "type": "object",
                "properties": {
                    "weight_grams": {"type": "integer", "minimum": 1, "maximum": 70000},
                    "dimensions": kind_schema("dims", "Outer size", noun, rng),
                    "reference": {"type": "string", "description": "Your reference, printed on the label."}
                },
                "required": ["weight_grams"]
            }),
            50,
        ),
        "filters" | "rules" => array_of(
            format!("{human}: conditions, all of which must hold."),
            json!({
                "type": "object",
                "properties": {
                    "field": {"type": "string", "description": "Field the condition tests."},
                    "op": {"type": "string", "enum": ["eq", "neq", "gt", "gte", "lt", "lte", "in", "contains"]},
                    "value": {"description": "Value to compare with: a string, number, boolean or list."}
                },
                "required": ["field", "op", "value"]
            }),
            50,
        ),
        _ => object_kind(kind, human, noun),
    }
}

/// The rarer structured kinds.
fn object_kind(kind: &str, human: &str, noun: &str) -> Value {
    let arr = |doc: String, props: Value, required: &[&str]| {
        json!({
            "type": "array",
            "description": doc,
            "items": {"type": "object", "properties": props, "required": required}
        })
    };
    match kind {
        "events" => arr(
            format!("{human}: what happened, in order."),
            json!({"at": {"type": "string", "format": "date-time"}, "text": {"type": "string"}}),
            &["at", "text"],
        ),
        "tasks" | "checklist" => arr(
            format!("{human}: items to do."),
            json!({
                "title": {"type": "string"},
                "owner_email": {"type": "string", "format": "email"},
                "done": {"type": "boolean"},
                "due_date": {"type": "string", "format": "date"}
            }),
            &["title"],
        ),
        "ratings" => arr(
            format!("{human}: one score per competency."),
            json!({
                "competency": {
                    "type": "string",
                    "enum": ["execution", "collaboration", "craft", "leadership", "communication"]
                },
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "comment": {"type": "string"}
            }),
            &["competency", "score"],
        ),
        "salary" => {
            json!({
                "type": "object",
                "description": format!("{human}: yearly gross."),
                "properties": {
                    "min": {"type": "integer", "minimum": 0},
                    "max": {"type": "integer", "minimum": 0},
                    "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]}
                },
                "required": ["min", "max", "currency"]
            })
        }
        "blocks" => arr(
            format!("{human}: page sections, top to bottom."),
            json!({
                "kind": {"type": "string", "enum": ["hero", "text", "image", "form", "pricing", "faq"]},
                "content": {"type": "object", "description": "The block's fields; depend on `kind`."}
            }),
            &["kind"],
        ),
        "recurrence" => {
            json!({
                "type": "object",
                "description": format!("{human} of the {noun}; a one-off if absent."),
                "properties": {
                    "frequency": {"type": "string", "enum": ["daily", "weekly", "monthly", "yearly"]},
                    "interval": {"type": "integer", "minimum": 1, "maximum": 99},
                    "until": {"type": "string", "format": "date"},
                    "by_weekday": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["mo", "tu", "we", "th", "fr", "sa", "su"]}
                    }
                },
                "required": ["frequency"]
            })
        }
        "anchor" => {
            json!({
                "type": "object",
                "description": format!("{human}: the text the comment refers to."),
                "properties": {
                    "start": {"type": "integer", "minimum": 0},
                    "end": {"type": "integer", "minimum": 0},
                    "quote": {"type": "string"}
                },
                "required": ["start", "end"]
            })
        }
        "widgets" => arr(
            format!("{human}: charts on the dashboard."),
            json!({
                "title": {"type": "string"},
                "chart": {"type": "string", "enum": ["line", "bar", "pie", "table", "number"]},
                "report_id": {"type": "string"},
                "position": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "integer"},
                        "y": {"type": "integer"},
                        "w": {"type": "integer"},
                        "h": {"type": "integer"}
                    }
                }
            }),
            &["chart", "report_id"],
        ),
        "destination" => {
            json!({
                "type": "object",
                "description": format!("{human}: where the file goes; a download link if absent."),
                "properties": {
                    "kind": {"type": "string", "enum": ["s3", "gcs", "sftp", "email"]},
                    "target": {"type": "string", "description": "Bucket path, host path or email address."}
                },
                "required": ["kind", "target"]
            })
        }
        "permissions" => arr(
            format!("{human}: what the role allows."),
            json!({
                "resource": {"type": "string"},
                "actions": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["read", "create", "update", "delete", "admin"]}
                }
            }),
            &["resource", "actions"],
        ),
        "bank" => {
            json!({
                "type": "object",
                "description": format!("{human}."),
                "properties": {
                    "iban": {"type": "string"},
                    "bic": {"type": "string"},
                    "account_holder": {"type": "string"}
                },
                "required": ["iban", "account_holder"]
            })
        }
        "stages" => arr(
            format!("{human}: run in order."),
            json!({
                "name": {"type": "string"},
                "image": {"type": "string", "description": "Container image."},
                "commands": {"type": "array", "items": {"type": "string"}},
                "timeout_minutes": {"type": "integer", "minimum": 1, "maximum": 360}
            }),
            &["name", "commands"],
        ),
        "transitions" => arr(
            format!("{human}: storage class changes by age."),
            json!({
                "after_days": {"type": "integer", "minimum": 1},
                "storage_class": {"type": "string", "enum": ["infrequent", "archive", "deep_archive"]}
            }),
            &["after_days", "storage_class"],
        ),
        "stops" => arr(
            format!("{human}: in visiting order."),
            json!({
                "address": {"type": "string"},
                "arrive_after": {"type": "string", "format": "date-time"},
                "arrive_before": {"type": "string", "format": "date-time"},
                "service_minutes": {"type": "integer", "minimum": 0}
            }),
            &["address"],
        ),
        "variants" => arr(
            format!("{human}: sizes, colours and such."),
            json!({
                "sku": {"type": "string"},
                "options": {"type": "object", "additionalProperties": {"type": "string"}},
                "price": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Minor units; the product's price if absent."
                },
                "stock": {"type": "integer", "minimum": 0}
            }),
            &["sku"],
        ),
        "location" => {
            json!({
                "type": "object",
                "description": format!("{human}."),
                "properties": {
                    "site": {"type": "string"},
                    "building": {"type": "string"},
                    "floor": {"type": "integer"},
                    "room": {"type": "string"}
                },
                "required": ["site"]
            })
        }
        "findings" => arr(
            format!("{human}: issues found."),
            json!({
                "severity": {"type": "string", "enum": ["info", "minor", "major", "critical"]},
                "text": {"type": "string"},
                "photo_upload_id": {"type": "string"}
            }),
            &["severity", "text"],
        ),
        other => panic!("unknown attribute kind `{other}`"),
    }
}

/// `due_date` -> `Due date`.
fn humanize(name: &str) -> String {
    let words = name.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Parses `name!:kind` into (name, required, kind).
fn parse_attr(spec: &str) -> (&str, bool, &str) {
    let (name, kind) = spec.split_once(':').expect("name:kind");
    match name.strip_suffix('!') {
        Some(n) => (n, true, kind),
        None => (name, false, kind),
    }
}

/// An object schema from `params` (each `(name, schema, required)`).
fn object(params: Vec<(String, Value, bool)>) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (name, schema, req) in params {
        if req {
            required.push(Value::String(name.clone()));
        }
        props.insert(name, schema);
    }
    let mut o = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        o["required"] = Value::Array(required);
    }
    o
}

fn attr_param(spec: &str, noun: &str, rng: &mut Prng) -> (String, Value, bool) {
    let (name, req, kind) = parse_attr(spec);
    (name.to_owned(), kind_schema(kind, &humanize(name), noun, rng), req)
}

/// `invoice` -> `invoices`, `activity` -> `activities`, `address` -> `addresses`.
fn plural(noun: &str) -> String {
    if let Some(stem) = noun.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'o', 'u'])) {
        format!("{stem}ies")
    } else if noun.ends_with(['s', 'x']) || noun.ends_with("ch") || noun.ends_with("sh") {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

/// `a` or `an`, for `noun`.
fn article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

/// A list of `items` in prose: `a, b and c`.
fn prose_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

struct Generated {
    name: String,
    description: String,
    effect: Effect,
    input: Value,
    output: Value,
}

/// The five tools of one resource: get, search (first resource of a domain) or list, create, update, and its verb.
fn resource_tools(domain: &str, res: &Resource, first: bool, rng: &mut Prng) -> Vec<Generated> {
    let noun = res.name.replace('_', " ");
    let nouns = plural(&noun);
    let id_param = || {
        (
            format!("{}_id", res.name),
            json!({
                "type": "string",
                "pattern": "^[a-z]+_[A-Za-z0-9]{10,32}$",
                "description": format!("ID of the {noun}.")
            }),
            true,
        )
    };
    let attr_names: Vec<String> = res.attrs.iter().map(|a| parse_attr(a).0.replace('_', " ")).collect();
    let some_attrs: Vec<&str> = attr_names.iter().take(2 + rng.below(2)).map(String::as_str).collect();
    let statuses =
        json!({"type": "string", "enum": res.statuses, "description": format!("Only {nouns} in this status.")});
    let read_sentences = [
        format!("Requires the `{domain}:read` scope."),
        format!("IDs are stable for the life of the {noun}."),
        "Times are returned in UTC.".to_owned(),
        format!("Deleted {nouns} are not included."),
        "Rate limited to 10 calls per second per workspace.".to_owned(),
    ];
    let write_sentences = [
        format!("Requires the `{domain}:write` scope."),
        "Records an entry in the audit log.".to_owned(),
        format!("Fails with `conflict` if the {noun} changed in the meantime."),
        "Webhooks subscribed to the change are called within a minute.".to_owned(),
        "Rate limited to 10 calls per second per workspace.".to_owned(),
    ];
    // The first sentence, then up to two distinct others of the effect's kind.
    let describe = |first_sentence: String, effect: Effect, rng: &mut Prng| {
        let pool = if effect == Effect::Read { &read_sentences } else { &write_sentences };
        let mut d = first_sentence;
        let start = rng.below(pool.len());
        for i in 0..rng.below(3) {
            d.push(' ');
            d.push_str(&pool[(start + i) % pool.len()]);
        }
        d
    };
    let output = |rng: &mut Prng| {
        let mut props = vec![
            ("id".to_owned(), json!({"type": "string"}), true),
            ("status".to_owned(), json!({"type": "string", "enum": res.statuses}), true),
            ("created_at".to_owned(), json!({"type": "string", "format": "date-time"}), true),
        ];
        for a in res.attrs.iter().take(3) {
            let (name, _, kind) = parse_attr(a);
            props.push((name.to_owned(), kind_schema(kind, &humanize(name), &noun, rng), false));
        }
        object(props)
    };
    let mut tools = Vec::new();

    // get
    let mut params = vec![id_param()];
    if rng.chance(50) {
        params.push((
            "include".into(),
            json!({
                "type": "array",
                "items": {"type": "string", "enum": ["history", "comments", "attachments", "related"]},
                "description": "Related records to embed in the result."
            }),
            false,
        ));
    }
    tools.push(Generated {
        name: format!("{domain}.{}.get", res.name),
        description: describe(
            format!("Returns one {noun} by its ID, with its {}.", prose_list(&some_attrs)),
            Effect::Read,
            rng,
        ),
        effect: Effect::Read,
        input: object(params),
        output: output(rng),
    });

    // search or list
    let limit = json!({
        "type": "integer",
        "minimum": 1,
        "maximum": 200,
        "default": 50,
        "description": "Most results to return (50 if absent)."
    });
    let (action, first_sentence, params) = if first {
        let mut filters = vec![(
            "status".to_owned(),
            json!({"type": "array", "items": statuses.clone(), "description": "Statuses to include."}),
            false,
        )];
        filters.push(("created".into(), kind_schema("range", "Created within", &noun, rng), false));
        if rng.chance(60) {
            filters.push(("owner_email".into(), kind_schema("email", "Owner", &noun, rng), false));
        }
        let params = vec![
            (
                "query".to_owned(),
                json!({
                    "type": "string",
                    "minLength": 1,
                    "description": format!("Words to match against the {noun}'s {}.", prose_list(&some_attrs))
                }),
                true,
            ),
            (
                "filters".into(),
                {
                    let mut f = object(filters);
                    f["description"] = json!("Narrows the matches; every filter given must hold.");
                    f
                },
                false,
            ),
            ("limit".into(), limit, false),
        ];
        ("search", format!("Searches {nouns} by free text, best matches first."), params)
    } else {
        let mut params = vec![("status".to_owned(), statuses, false)];
        if rng.chance(70) {
            params.push((
                "created_after".into(),
                kind_schema("datetime", "Only those created after", &noun, rng),
                false,
            ));
        }
        if rng.chance(40) {
            params.push((
                "updated_since".into(),
                kind_schema("datetime", "Only those changed since", &noun, rng),
                false,
            ));
        }
        params.push(("limit".into(), limit, false));
        params.push((
            "cursor".into(),
            json!({"type": "string", "description": "Opaque cursor from the previous page's `next_cursor`."}),
            false,
        ));
        if rng.chance(50) {
            params.push((
                "sort".into(),
                json!({
                    "type": "string",
                    "enum": ["created_at", "-created_at", "updated_at", "-updated_at"],
                    "description": "Sort order; a leading `-` sorts descending. `-created_at` if absent."
                }),
                false,
            ));
        }
        ("list", format!("Lists {nouns}, newest first, one page at a time."), params)
    };
    tools.push(Generated {
        name: format!("{domain}.{}.{action}", res.name),
        description: describe(first_sentence, Effect::Read, rng),
        effect: Effect::Read,
        input: object(params),
        output: json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": output(rng)},
                "next_cursor": {"type": ["string", "null"]}
            },
            "required": ["items"]
        }),
    });

    // create: every required attribute, and some optional ones
    let mut params: Vec<(String, Value, bool)> = Vec::new();
    for a in res.attrs {
        let (_, req, _) = parse_attr(a);
        if req || rng.chance(75) {
            params.push(attr_param(a, &noun, rng));
        }
    }
    if rng.chance(40) {
        params.push(attr_param("metadata:kv", &noun, rng));
    }
    if rng.chance(40) {
        params.push((
            "idempotency_key".into(),
            json!({
                "type": "string",
                "maxLength": 64,
                "description": "Repeating a call with the same key creates nothing more."
            }),
            false,
        ));
    }
    let required: Vec<&str> = res.attrs.iter().map(|a| parse_attr(a)).filter(|a| a.1).map(|a| a.0).collect();
    tools.push(Generated {
        name: format!("{domain}.{}.create", res.name),
        description: describe(
            format!(
                "Creates {} {noun}. Needs {}; the other fields are optional.",
                article(&noun),
                prose_list(&required).replace('_', " ")
            ),
            Effect::Write,
            rng,
        ),
        effect: Effect::Write,
        input: object(params),
        output: output(rng),
    });

    // update: the id, and a patch of optional attributes
    let mut patch: Vec<(String, Value, bool)> = Vec::new();
    for a in res.attrs {
        if rng.chance(70) {
            let (name, _, kind) = parse_attr(a);
            patch.push((name.to_owned(), kind_schema(kind, &humanize(name), &noun, rng), false));
        }
    }
    patch.push((
        "status".into(),
        json!({"type": "string", "enum": res.statuses, "description": format!("New status of the {noun}.")}),
        false,
    ));
    let mut changes = object(patch);
    changes["description"] = json!("Fields to change; fields left out keep their value.");
    let mut params = vec![id_param(), ("changes".into(), changes, true)];
    if rng.chance(50) {
        params.push((
            "if_version".into(),
            json!({
                "type": "integer",
                "minimum": 1,
                "description": format!("Update only if the {noun} is still at this version (optimistic locking).")
            }),
            false,
        ));
    }
    tools.push(Generated {
        name: format!("{domain}.{}.update", res.name),
        description: describe(format!("Changes fields of an existing {noun}."), Effect::Write, rng),
        effect: Effect::Write,
        input: object(params),
        output: output(rng),
    });

    // the resource's own action
    let mut params = vec![id_param()];
    params.extend(res.verb_params.iter().map(|p| attr_param(p, &noun, rng)));
    if rng.chance(30) {
        params.push((
            "idempotency_key".into(),
            json!({
                "type": "string",
                "maxLength": 64,
                "description": "Repeating a call with the same key does not repeat its effect."
            }),
            false,
        ));
    }
    tools.push(Generated {
        name: format!("{domain}.{}.{}", res.name, res.verb),
        description: describe(res.verb_doc.to_owned(), res.verb_effect, rng),
        effect: res.verb_effect,
        input: object(params),
        output: output(rng),
    });
    tools
}

fn definitions() -> Vec<Arc<ToolDefinition>> {
    let handler: Arc<dyn DynHandler> =
        Arc::new(|_args: Value, _ctx: CallContext| async { Ok::<Value, keel_tools_core::ToolError>(json!({})) });
    let mut rng = Prng(SEED);
    let mut defs = Vec::new();
    for domain in &DOMAINS {
        for (i, res) in domain.resources.iter().enumerate() {
            for g in resource_tools(domain.name, res, i == 0, &mut rng) {
                let def = ToolDefinition::builder(g.name.clone())
                    .description(g.description)
                    .version("1.0")
                    .effect(g.effect)
                    .input_schema(g.input)
                    .output_schema(g.output)
                    .handler(handler.clone())
                    .build()
                    .unwrap_or_else(|e| panic!("{}: {e}", g.name));
                defs.push(Arc::new(def));
            }
        }
    }
    defs
}

/// Counts over the input schemas: parameters, and how many of them are optional, nested objects, arrays of
/// objects, enums, formatted strings.
fn shape_stats(view: &ToolView) -> Value {
    fn walk(v: &Value, s: &mut [u64; 4]) {
        if v.get("enum").is_some() {
            s[0] += 1;
        }
        if v.get("format").is_some() {
            s[1] += 1;
        }
        if v.get("type") == Some(&json!("object")) {
            s[2] += 1;
        }
        if v.get("type") == Some(&json!("array")) && v["items"].get("type") == Some(&json!("object")) {
            s[3] += 1;
        }
        match v {
            Value::Object(m) => m.values().for_each(|c| walk(c, s)),
            Value::Array(a) => a.iter().for_each(|c| walk(c, s)),
            _ => {}
        }
    }
    let (mut params, mut optional, mut min, mut max) = (0usize, 0usize, usize::MAX, 0usize);
    let mut s = [0u64; 4];
    for d in view.iter() {
        let input = d.input_schema();
        let props = input["properties"].as_object().map_or(0, |p| p.len());
        let req = input.get("required").and_then(Value::as_array).map_or(0, |r| r.len());
        params += props;
        optional += props - req;
        min = min.min(props);
        max = max.max(props);
        for p in input["properties"].as_object().into_iter().flat_map(|p| p.values()) {
            walk(p, &mut s);
        }
    }
    json!({
        "parameters": params,
        "optional_parameters": optional,
        "parameters_per_tool": {"min": min, "max": max, "mean": params as f64 / view.len() as f64},
        "enums": s[0],
        "formatted_strings": s[1],
        "object_schemas_below_top": s[2],
        "arrays_of_objects": s[3],
    })
}

/// Runs the search tool of `view` once, the way a model's call would, and returns the names it surfaced.
fn search_once(view: &ToolView) -> Vec<String> {
    let executor = Executor::new(view.clone()).expect("executor");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let call = ToolCall::new("c1", SEARCH_TOOL, json!({"query": SEARCH_QUERY, "limit": SURFACED}));
    let result = runtime.block_on(executor.call(call));
    let data = result.data().unwrap_or_else(|| panic!("the search failed: {result:?}"));
    data["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let wire = t["name"].as_str().expect("name");
            view.get_by_wire_name(wire).expect("a tool of the view").name().to_owned()
        })
        .collect()
}

fn main() {
    let defs = definitions();
    let names: BTreeSet<&str> = defs.iter().map(|d| d.name()).collect();
    assert_eq!(names.len(), defs.len(), "generated names are unique");
    for core in CORE {
        assert!(names.contains(core), "core tool {core} is generated");
    }
    let full = ToolView::new(defs.clone());
    let rest: Vec<&str> = full.names().filter(|n| !CORE.contains(n)).collect();
    let deferred_view = full.defer(&rest).expect("names of the view").with_tool_search().expect("search tool");
    let shown = deferred_view.shown(&Surfaced::new());
    let surfaced = search_once(&deferred_view);
    let searched = deferred_view.shown(&surfaced.iter().collect::<Surfaced>());

    let mut lists = Map::new();
    for provider in Provider::ALL {
        lists.insert(
            provider.as_str().to_owned(),
            json!({
                "full": full.tool_list(provider).to_json(),
                "deferred": shown.tool_list(provider).to_json(),
                "searched": searched.tool_list(provider).to_json(),
            }),
        );
    }
    let report = json!({
        "seed": format!("{SEED:#018x}"),
        "tools": full.len(),
        "domains": DOMAINS.len(),
        "shapes": shape_stats(&full),
        "kept": CORE,
        "search": {"query": SEARCH_QUERY, "limit": SURFACED, "surfaced": surfaced},
        "counts": {
            "full": full.len(),
            "deferred": shown.len(),
            "searched": searched.len(),
        },
        "lists": lists,
    });
    println!("{report}");
}
