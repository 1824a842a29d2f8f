/* SPDX-License-Identifier: MIT */
/* What every signer shares (signer.h): its roots and, for the local one, its CA are freed here;
 * the rest by its own ops. */

#include "signer.h"

struct signer *signer_free(struct signer *s) {
        if (!s)
                return NULL;
        sk_X509_pop_free(s->roots, X509_free);
        s->roots = NULL;
        s->local_ca = ca_free(s->local_ca);
        s->ops->free(s);
        return NULL;
}
