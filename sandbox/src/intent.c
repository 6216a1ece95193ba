/* intent.c - an environment's intent record: every side effect on the host
 * that an environment may have, written down before it is made, so that a
 * service killed at any moment (SIGKILL, power loss) can be followed by one
 * that undoes all of it (ADR decision 1: the workspace is a cache; a restart
 * destroys, it never resumes).
 *
 * The record is <state>/<env id>/intent.json, replaced whole (atomic write
 * through the environment's verified descriptor) each time an effect is
 * added:
 *   {"environment": "env-...", "mechanism": "gvisor",
 *    "effects": ["id_claim", "proxy_pin", "volume", "mechanism"]}
 * The environment's directory itself is the one effect not recorded here:
 * it is made first, exclusively, and its name is what recovery looks for.
 * A directory with no record is one whose create died before its first
 * effect, one whose destroy had undone them all, or one an older version
 * made: recovery then undoes every effect it knows, which is safe because
 * every undo is idempotent (it removes what is there, and nothing else).
 * An effect name this version does not know makes recovery do the same. */
#include "sandbox-int.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    unsigned bit;
    const char *name;
} effect_names[] = {
    {PH_EFFECT_ID_CLAIM, "id_claim"},
    {PH_EFFECT_PROXY_PIN, "proxy_pin"},
    {PH_EFFECT_VOLUME, "volume"},
    {PH_EFFECT_MECHANISM, "mechanism"},
};
#define EFFECT_COUNT (sizeof effect_names / sizeof effect_names[0])

ph_status ph_intent_record(ph_intent *in, unsigned effect, ph_diag *diag)
{
    if ((in->effects & effect) == effect)
        return PH_OK;
    json_t *list = json_array();
    unsigned effects = in->effects | effect;
    for (size_t i = 0; list && i < EFFECT_COUNT; i++)
        if ((effects & effect_names[i].bit) &&
            json_array_append_new(list, json_string(effect_names[i].name)) != 0) {
            json_decref(list);
            list = NULL;
        }
    json_t *o = list ? json_pack("{s:s, s:s, s:o}", "environment", in->env_id, "mechanism",
                                 ph_sandbox_mechanism_name(in->mechanism), "effects", list)
                     : NULL;
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = ph_fault_point("intent_write", diag);
    if (st == PH_OK)
        st = ph_state_write(in->env_fd, PH_INTENT_FILE, text, strlen(text), 0600, diag);
    free(text);
    if (st == PH_OK)
        in->effects = effects;
    return st;
}

ph_status ph_intent_read(int env_fd, ph_sandbox_mechanism dflt, ph_intent *out, ph_diag *diag)
{
    out->env_fd = env_fd;
    out->env_id[0] = '\0';
    out->mechanism = dflt;
    out->effects = PH_EFFECTS_ALL;
    char *text = NULL;
    ph_status st = ph_state_read(env_fd, PH_INTENT_FILE, &text, NULL, diag);
    if (st != PH_OK)
        return st;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    json_t *list = json_object_get(o, "effects");
    ph_sandbox_mechanism m;
    if (!json_is_array(list) ||
        ph_sandbox_mechanism_from_name(json_string_value(json_object_get(o, "mechanism")), &m,
                                       NULL) != PH_OK) {
        json_decref(o);
        return ph_diag_set(diag, PH_E_FORMAT, 0, "state_file_malformed: %s", PH_INTENT_FILE);
    }
    out->mechanism = m;
    unsigned effects = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *name = json_string_value(json_array_get(list, i));
        unsigned bit = PH_EFFECTS_ALL; /* unknown: undo everything */
        for (size_t k = 0; name && k < EFFECT_COUNT; k++)
            if (strcmp(name, effect_names[k].name) == 0)
                bit = effect_names[k].bit;
        effects |= bit;
    }
    json_decref(o);
    out->effects = effects;
    return PH_OK;
}
