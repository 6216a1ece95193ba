/*
 * pinhole/tree_remove.h - removing a directory tree that someone else
 * controls (a workspace, a mechanism's state), from a verified directory
 * descriptor.
 *
 * Never follows a symbolic link: a link is removed, not what it points to.
 * Never leaves the tree: it descends with openat(O_NOFOLLOW|O_DIRECTORY)
 * and climbs back with "..", checking that ".." is the directory it came
 * from (device and inode), so a directory moved away meanwhile stops the
 * removal instead of taking it elsewhere. Iterative: the depth costs heap
 * (one small record a level), not stack, and at most about
 * 2 * PH_TREE_OPEN_LEVELS + 4 descriptors (a directory and its stream per
 * open level), so a tree 10,000 or 1,000,000 deep is removed like a flat
 * one. Opens no file but directories (a fifo or a device is unlinked, never
 * opened).
 */
#ifndef PINHOLE_TREE_REMOVE_H
#define PINHOLE_TREE_REMOVE_H

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    /* Stay on the filesystem of the top directory: a directory on another
     * one (a mount point inside the tree) is neither entered nor removed,
     * and is reported (errno EXDEV). */
    PH_TREE_ONE_FS = 1,
};

/* Directories kept open on the way down (each saves a rescan on the way up). */
#define PH_TREE_OPEN_LEVELS 32

/*
 * Removes name in the directory parent_fd and, if it is a directory,
 * everything under it. Returns PH_OK when name is gone (or was never
 * there). Otherwise removes all it can and returns PH_E_IO with diag naming
 * the first entry it could not remove and why (errno kept from that
 * failure), or PH_E_LIMIT when the tree is deeper than 16,777,216 levels or
 * PH_E_NOMEM.
 */
PH_API ph_status ph_tree_remove_at(int parent_fd, const char *name, int flags, ph_diag *diag);

/* The same for everything in the directory dir_fd, which stays (empty on
 * PH_OK). dir_fd is borrowed and its file offset is not used. */
PH_API ph_status ph_tree_empty(int dir_fd, int flags, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_TREE_REMOVE_H */
