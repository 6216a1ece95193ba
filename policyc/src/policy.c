/* policy.c - freeing a pc_policy (policy.h). */
#include "policy.h"

#include <stdlib.h>

void pc_policy_free(pc_policy **policy)
{
    if (!policy || !*policy)
        return;
    pc_policy *p = *policy;
    for (size_t i = 0; i < p->nlists; i++) {
        pc_list *l = &p->lists[i];
        free(l->name);
        for (size_t j = 0; j < l->nincludes; j++)
            free(l->includes[j]);
        free(l->includes);
        free(l->include_pos);
        free(l->include_index);
        for (size_t j = 0; j < l->nrules; j++) {
            pc_rule *r = &l->rules[j];
            free(r->host);
            free(r->ports);
            free(r->reason);
            free(r->source_file);
        }
        free(l->rules);
    }
    free(p->lists);
    free(p->file);
    free(p);
    *policy = NULL;
}
