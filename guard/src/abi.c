/* abi.c - sizes and field offsets of the public structs a binding mirrors
 * (pinhole/abi.h). One table: a struct or field a binding mirrors is listed
 * here, so the binding can check it. */
#include "pinhole/abi.h"

#include <string.h>

#include "pinhole/dial.h"
#include "pinhole/guard.h"
#include "pinhole/redirect.h"
#include "pinhole/resolve.h"

typedef struct abi_field {
    const char *type;
    const char *field; /* NULL: the row gives sizeof(type) */
    size_t value;
} abi_field;

#define ABI_SIZE(T) {#T, NULL, sizeof(T)}
#define ABI_FIELD(T, F) {#T, #F, offsetof(T, F)}

static const abi_field abi_table[] = {
    ABI_SIZE(ph_diag),
    ABI_FIELD(ph_diag, status),
    ABI_FIELD(ph_diag, offset),
    ABI_FIELD(ph_diag, message),

    ABI_SIZE(ph_guard_options),
    ABI_FIELD(ph_guard_options, dns_servers),
    ABI_FIELD(ph_guard_options, dns_timeout_ms),
    ABI_FIELD(ph_guard_options, reload_interval_ms),
    ABI_FIELD(ph_guard_options, grant_keys_path),
    ABI_FIELD(ph_guard_options, dns_cache_entries),
    ABI_FIELD(ph_guard_options, dns_cache_max_ttl_s),
    ABI_FIELD(ph_guard_options, dns_negative_ttl_s),
    ABI_FIELD(ph_guard_options, dns_cache_off),
    ABI_FIELD(ph_guard_options, revocations_path),

    ABI_SIZE(ph_pinned_addrs),
    ABI_FIELD(ph_pinned_addrs, count),
    ABI_FIELD(ph_pinned_addrs, addr),
    ABI_FIELD(ph_pinned_addrs, addr_len),

    ABI_SIZE(ph_verdict),
    ABI_FIELD(ph_verdict, allowed),
    ABI_FIELD(ph_verdict, reason),
    ABI_FIELD(ph_verdict, scheme),
    ABI_FIELD(ph_verdict, host),
    ABI_FIELD(ph_verdict, port),
    ABI_FIELD(ph_verdict, has_rule),
    ABI_FIELD(ph_verdict, rule_index),
    ABI_FIELD(ph_verdict, rule_list),
    ABI_FIELD(ph_verdict, rule_host),
    ABI_FIELD(ph_verdict, rule_file),
    ABI_FIELD(ph_verdict, rule_line),
    ABI_FIELD(ph_verdict, rule_reason),
    ABI_FIELD(ph_verdict, policy_id),
    ABI_FIELD(ph_verdict, detail),
    ABI_FIELD(ph_verdict, rule_protocol),

    ABI_SIZE(ph_grant),
    ABI_FIELD(ph_grant, kid),
    ABI_FIELD(ph_grant, tenant),
    ABI_FIELD(ph_grant, lease),
    ABI_FIELD(ph_grant, list),
    ABI_FIELD(ph_grant, not_before),
    ABI_FIELD(ph_grant, expires),

    ABI_SIZE(ph_connect_request),
    ABI_FIELD(ph_connect_request, authority),
    ABI_FIELD(ph_connect_request, authority_len),
    ABI_FIELD(ph_connect_request, proxy_authorization),
    ABI_FIELD(ph_connect_request, proxy_authorization_len),
    ABI_FIELD(ph_connect_request, list),
    ABI_FIELD(ph_connect_request, now),

    ABI_SIZE(ph_url_request),
    ABI_FIELD(ph_url_request, url),
    ABI_FIELD(ph_url_request, url_len),
    ABI_FIELD(ph_url_request, proxy_authorization),
    ABI_FIELD(ph_url_request, proxy_authorization_len),
    ABI_FIELD(ph_url_request, list),
    ABI_FIELD(ph_url_request, now),

    ABI_SIZE(ph_decision),
    ABI_FIELD(ph_decision, allowed),
    ABI_FIELD(ph_decision, reason),
    ABI_FIELD(ph_decision, http_status),
    ABI_FIELD(ph_decision, next),
    ABI_FIELD(ph_decision, client_detail),
    ABI_FIELD(ph_decision, log_detail),
    ABI_FIELD(ph_decision, has_grant),
    ABI_FIELD(ph_decision, grant),
    ABI_FIELD(ph_decision, has_authority),
    ABI_FIELD(ph_decision, verdict),
    ABI_FIELD(ph_decision, generation),
    ABI_FIELD(ph_decision, keyring_id),
    ABI_FIELD(ph_decision, path_offset),
    ABI_FIELD(ph_decision, path_len),

    ABI_SIZE(ph_dial_options),
    ABI_FIELD(ph_dial_options, timeout_ms),
    ABI_FIELD(ph_dial_options, stagger_ms),

    ABI_SIZE(ph_dial_result),
    ABI_FIELD(ph_dial_result, verdict),
    ABI_FIELD(ph_dial_result, addr),
    ABI_FIELD(ph_dial_result, addr_len),
    ABI_FIELD(ph_dial_result, addr_text),
    ABI_FIELD(ph_dial_result, checked),
    ABI_FIELD(ph_dial_result, resolve_ms),
    ABI_FIELD(ph_dial_result, elapsed_ms),

    ABI_SIZE(ph_redirect_options),
    ABI_FIELD(ph_redirect_options, max_hops),
    ABI_FIELD(ph_redirect_options, allow_downgrade),
    ABI_FIELD(ph_redirect_options, resend_body),
    ABI_FIELD(ph_redirect_options, allow_body_cross_origin),

    ABI_SIZE(ph_redirect),
    ABI_FIELD(ph_redirect, url),
    ABI_FIELD(ph_redirect, same_origin),
    ABI_FIELD(ph_redirect, drop_credentials),
    ABI_FIELD(ph_redirect, verdict),

    ABI_SIZE(ph_resolver_loop),
    ABI_FIELD(ph_resolver_loop, watch),
    ABI_FIELD(ph_resolver_loop, timer),
    ABI_FIELD(ph_resolver_loop, arg),

    ABI_SIZE(ph_resolve_answer),
    ABI_FIELD(ph_resolve_answer, st),
    ABI_FIELD(ph_resolve_answer, reason),
    ABI_FIELD(ph_resolve_answer, addrs),
    ABI_FIELD(ph_resolve_answer, detail),
    ABI_FIELD(ph_resolve_answer, from_cache),
    ABI_FIELD(ph_resolve_answer, elapsed_us),
};

static const abi_field *abi_find(const char *type, const char *field)
{
    if (type == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof abi_table / sizeof *abi_table; i++) {
        const abi_field *f = &abi_table[i];
        if (strcmp(f->type, type) != 0)
            continue;
        if (field == NULL ? f->field == NULL : f->field != NULL && strcmp(f->field, field) == 0)
            return f;
    }
    return NULL;
}

size_t ph_abi_struct_size(const char *name)
{
    const abi_field *f = abi_find(name, NULL);
    return f != NULL ? f->value : PH_ABI_UNKNOWN;
}

size_t ph_abi_field_offset(const char *struct_name, const char *field)
{
    if (field == NULL)
        return PH_ABI_UNKNOWN;
    const abi_field *f = abi_find(struct_name, field);
    return f != NULL ? f->value : PH_ABI_UNKNOWN;
}
