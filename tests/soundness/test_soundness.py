"""The soundness figure: every corpus script (``fixtures/soundness/``) run as the
original and, migrated, at world 2 under ``accel-migrate launch`` (DDP over gloo),
then classified MATCH, FLAGGED, LOUD, SILENT or HANG (see ``corpus.py`` for the
precise rules and docs/soundness.md for the published table).

SILENT and HANG fail. ``EXPECTED`` pins the class of every other case, so that a
MATCH that becomes FLAGGED (or the reverse) is seen and the table updated. Cases
that are SILENT or HANG today are listed in ``UNSOUND_TODAY`` with the cause and
run as ``xfail(strict=True)``: fixing the tool turns them into an XPASS that asks
for the entry to move to ``EXPECTED``.

``ACCEL_MIGRATE_SOUNDNESS_DOC=1`` rewrites the table in docs/soundness.md from this
run (between its ``soundness-table`` markers).

The module fixture is CI's longest item. What keeps it short (docs/soundness.md,
"Running it"): every process forks from a warm server (tests/warm_python.py), a
``batch both`` folder's original runs once for its two cases, the pool runs one
job more than its share of the cores; ``python -m tests.soundness.costs`` measures
a case's CPU seconds per phase.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT, parallel_jobs

from .corpus import (
    BROKEN,
    Case,
    Outcome,
    classify,
    discover,
    parse_case,
    render_table,
    whole_corpus,
)

pytestmark = pytest.mark.multiprocess

CASES = discover()
#: Jobs run at once: one more than the module's share of the cores. A job is a
#: migration in this process (under its GIL: two jobs migrating at once use one
#: core), an original, then a launcher that starts two workers and waits: with
#: only its share, a core idles between those phases. This module is CI's longest
#: item (the other xdist worker's files end long before it), so the extra job is
#: what keeps both cores busy once it runs alone.
PARALLEL = parallel_jobs() + 1
DOC = ROOT / "docs" / "soundness.md"
START, END = "<!-- soundness-table:start -->", "<!-- soundness-table:end -->"

#: The class each sound case has today.
EXPECTED: dict[str, str] = {
    "second_run_helper_state_dict_fsdp_r30d": "FLAGGED",
    "tempdir_best_reload_r30d": "MATCH",
    # r31b: the save is in a helper whose one call is inside a try; the barrier
    # now follows that try (FLAGGED before: AM010's needs-review, no barrier,
    # the others could read the cache before the main process wrote it)
    "stats_cache_in_caller_try_r31b": "MATCH",
    "amp_autocast": "MATCH",
    "args_gpu_imagenet": "MATCH",
    "autograd_backward": "MATCH",
    "batch_size_shape": "MATCH",
    "cat_predictions": "MATCH",
    "chain_optimizer": "MATCH",
    "checkpoint_resume": "MATCH",
    "cifar100_project": "MATCH",
    "cifar100_utils": "MATCH",
    "cifar_bn_resnet": "MATCH",
    "conditional_model": "MATCH",
    "data_parallel": "MATCH",
    "dcgan_bn_discriminator": "MATCH",
    "ddp_spawn": "MATCH",
    "ddp_tutorial_trainer": "MATCH",
    "early_stop_f1": "FLAGGED",
    "early_stopping": "MATCH",
    "factory_model": "MATCH",
    "gpt_configure_optimizers": "MATCH",
    "hogwild": "MATCH",
    "infogan_heads": "MATCH",
    "labels_minus_100": "MATCH",
    "mingpt_sampler": "MATCH",
    "loss_terms_logged": "MATCH",
    "mnist_cnn": "FLAGGED",
    "packed_rnn": "MATCH",
    "model_list": "FLAGGED",
    "module_shadow": "MATCH",
    "predictions_csv": "MATCH",
    "psnr_metric": "MATCH",
    "seq2seq_ignore_index": "FLAGGED",
    "submission_helper": "MATCH",
    "sgan_tensor_type": "MATCH",
    "sum_loss_autoencoder": "MATCH",
    "tqdm_loop": "MATCH",
    "tuple_loaders_project": "MATCH",
    "tuple_models": "MATCH",
    "vae_sum_loss": "MATCH",
    "wgan_gp": "MATCH",
    "simclr_ntxent": "FLAGGED",
    "triplet_batch_hard": "FLAGGED",
    "detection_loss_dict": "FLAGGED",
    "ema_warmup_cosine": "MATCH",
    "grad_accum_trainer": "MATCH",
    "distill_frozen_teacher": "MATCH",
    "weighted_sampler": "MATCH",
    "char_rnn_bptt": "MATCH",
    "mixup_randperm": "FLAGGED",
    "multitask_loss_dict": "MATCH",
    # round 7 red team (extended: new shapes, run with ACCEL_MIGRATE_SOUNDNESS_ALL=1)
    "trainer_metrics_project": "FLAGGED",
    "pix2pix_model_project": "FLAGGED",
    "pix2pix_single_file": "FLAGGED",
    "printed_batch_metrics": "MATCH",
    "keras_fit_module": "FLAGGED",
    "segmentation_miou": "FLAGGED",
    "memory_bank_instdisc": "FLAGGED",
    "label_smoothed_ntokens": "MATCH",
    # issue 12: batch values shown through channels other than print
    "tqdm_logger_metrics": "MATCH",
    # round 9 red team (new shapes; those that repeat a shape are extended)
    "dataset_random_crop": "FLAGGED",
    "collate_noise_denoiser": "FLAGGED",
    "cyclegan_image_pool": "FLAGGED",
    "callback_loss_history": "MATCH",
    "running_normalizer": "FLAGGED",
    "dqn_replay_buffer": "MATCH",
    "summed_terms_printed": "MATCH",
    "plateau_batch_mean_acc": "MATCH",
    "bn_tiny_shard": "MATCH",
    "generator_noise_batches": "MATCH",
    "nanogpt_get_batch": "MATCH",
    "ohem_topk_loss": "FLAGGED",
    "samples_seen_warmup": "FLAGGED",
    "batch_class_weights": "FLAGGED",
    "loss_threshold_break": "MATCH",
    "phase_loop_finetune": "MATCH",
    "sample_weighted_loss": "MATCH",
    # `sum(losses)` of a fixed list of means (issue 12, r33e): was SILENT
    "summed_loss_list_r33e": "MATCH",
    "per_task_targets_list_r34a": "MATCH",
    "per_task_targets_enumerated_r34a": "MATCH",
    "np_append_eval_r34a": "FLAGGED",
    "first_row_per_batch_r34a": "MATCH",
    # one loss per sample appended over zip(out, targets) (fixo): was SILENT
    "per_sample_loss_list_fixo": "MATCH",
    "smoothed_loss_dict": "MATCH",
    "cutmix_callable": "FLAGGED",
    # models in containers and built by methods (issue 12, round 9)
    "token_models_in_turn": "MATCH",
    "trainer_built_model_step": "MATCH",
    "ensemble_module_list": "FLAGGED",
    # round 10 red team: project folders migrated in batch mode (`# soundness: batch`)
    "cifar100_project_batch": "MATCH",
    "cifar100_utils_batch": "MATCH",
    "gpt_configure_optimizers_batch": "MATCH",
    "pix2pix_model_project_batch": "FLAGGED",
    "trainer_metrics_project_batch": "MATCH",
    "tuple_loaders_project_batch": "MATCH",
    # round 10 red team: unseen multi-file projects, each in both modes
    "imagenet_utils_project": "MATCH",
    "imagenet_utils_project_batch": "MATCH",
    "snapshot_rotation_project": "FLAGGED",
    "snapshot_rotation_project_batch": "MATCH",
    "logger_class_project": "FLAGGED",
    "logger_class_project_batch": "MATCH",
    "predict_csv_project": "FLAGGED",
    "predict_csv_project_batch": "MATCH",
    "early_stop_helper_project": "LOUD",
    "early_stop_helper_project_batch": "FLAGGED",
    "mingpt_lib_project": "FLAGGED",
    "mingpt_lib_project_batch": "MATCH",
    "mingpt_named_groups_r22t_project": "FLAGGED",
    "mingpt_named_groups_r22t_project_batch": "MATCH",
    "engine_reference_project": "FLAGGED",
    "engine_reference_project_batch": "MATCH",
    "dice_per_batch": "FLAGGED",
    "pad_sequence_time_first": "MATCH",
    "per_batch_accuracy_mean": "MATCH",
    "seq2seq_data_project": "MATCH",
    "seq2seq_data_project_batch": "MATCH",
    "sum_loss_module_project": "MATCH",
    "sum_loss_module_project_batch": "MATCH",
    "builder_registry_project": "MATCH",
    "builder_registry_project_batch": "MATCH",
    "trainer_module_project": "FLAGGED",
    "trainer_module_project_batch": "MATCH",
    # round 11 red team: unseen shapes spread over functions, classes and files
    "cifar_progress_project": "FLAGGED",
    "cifar_progress_project_batch": "MATCH",
    "registry_engine_project": "FLAGGED",
    "registry_engine_project_batch": "MATCH",
    "trainer_accum_plateau_project": "FLAGGED",
    "trainer_accum_plateau_project_batch": "MATCH",
    "focal_loss_size_average": "MATCH",
    "word_lm_whole_model": "MATCH",
    "acgan_aux_accuracy": "FLAGGED",
    "seq2seq_teacher_forcing": "MATCH",
    "subset_sampler_split": "FLAGGED",
    "hf_style_trainer": "MATCH",
    # round 13, the lead: unseen shapes tried as a new user would
    "zip_two_loaders": "MATCH",
    "kfold_cv": "MATCH",
    "onecycle_clip": "MATCH",
    "early_stopping_class": "MATCH",
    "iter_next_restart": "MATCH",
    "masked_token_mean": "MATCH",
    "loader_stats_prepass": "MATCH",
    "midepoch_eval": "MATCH",
    # round 13 red team: per-class and per-sample evaluation metrics
    "class_dict_counts": "FLAGGED",
    "confusion_per_sample": "FLAGGED",
    "extend_numpy_f1": "MATCH",
    "per_class_fixed_range": "FLAGGED",
    # round 15 red team: helper modules migrated for their callers (batch mode)
    "ckpt_keep_last_project": "FLAGGED",
    "reid_stdout_logger_project": "MATCH",
    "reid_stdout_logger_project_batch": "MATCH",
    "classification_star_utils_project": "FLAGGED",
    "classification_star_utils_project_batch": "FLAGGED",
    "snapshot_average_project": "FLAGGED",
    "prune_helpers_project": "FLAGGED",
    "best_reload_helper_project": "MATCH",
    "best_reload_helper_project_batch": "MATCH",
    "fixed_probe_batch_project": "FLAGGED",
    "fixed_probe_batch_project_batch": "FLAGGED",
    # round 15 red team, second pass: evaluation helpers handed sharded loaders
    "eval_mean_len_project": "FLAGGED",
    "eval_mean_len_project_batch": "MATCH",
    "meter_validate_break_project": "FLAGGED",
    "meter_validate_break_project_batch": "MATCH",
    "kwarg_chain_eval_project": "FLAGGED",
    "kwarg_chain_eval_project_batch": "FLAGGED",
    "holdout_correct_total_project": "FLAGGED",
    "holdout_correct_total_project_batch": "MATCH",
    "predict_metric_ckpt_project": "FLAGGED",
    "predict_metric_ckpt_project_batch": "MATCH",
    # round 16 red team: draws by tensor methods and distributions, BatchNorm
    # subclasses, accumulation with a carried-over gradient
    "vae_tensor_normal_r16": "FLAGGED",
    "vae_distributions_rsample_r16": "FLAGGED",
    "sngan_cond_bn_r16": "LOUD",
    "accum_carryover_split_r16": "MATCH",
    "gan_minibatch_stddev_r16": "FLAGGED",
    "swa_update_bn_r16": "MATCH",
    # round 17 red team: a MoCo queue in a model buffer, a class-balanced loss
    # and a Dice + BCE loss in loss classes, a no-trainer CLM loop, an EMA
    # AveragedModel, scheduled sampling
    "clm_no_trainer_repeat_r17": "FLAGGED",
    "moco_queue_r17": "FLAGGED",
    "ema_avgmodel_top5_r17": "MATCH",
    "class_balanced_targets_r17": "FLAGGED",
    "unet_dicebce_r17": "FLAGGED",
    "scheduled_sampling_r17": "MATCH",
    # round 18 red team (projects): a BaseTrainer subclass handed the model
    # through super().__init__, a hand-written Lightning fit() loop in a helper
    # module (both half-migrated in file mode before), an evaluator class
    # summing on self, AverageMeter + plateau, a config dataclass, callbacks
    "pytorch_template_r18_project": "FLAGGED",
    "pytorch_template_r18_project_batch": "FLAGGED",
    "lit_fit_loop_r18_project": "FLAGGED",
    "lit_fit_loop_r18_project_batch": "FLAGGED",
    "evaluator_state_r18_project": "FLAGGED",
    "evaluator_state_r18_project_batch": "FLAGGED",
    "meter_plateau_r18_project": "MATCH",
    "meter_plateau_r18_project_batch": "MATCH",
    "config_steps_r18_project": "MATCH",
    "config_steps_r18_project_batch": "MATCH",
    "callbacks_state_r18_project": "MATCH",
    # round 19 red team (numerics, data): CTC's joined targets, an L2 term of
    # the weights next to a summed loss, advantages normalised per minibatch,
    # FixMatch's two loaders (4 were SILENT before); a bucketing batch sampler,
    # an IterableDataset
    "ctc_bigru_concat_targets_r19": "MATCH",
    "sum_loss_l2_penalty_r19": "FLAGGED",
    "a2c_minibatch_adv_norm_r19": "FLAGGED",
    "fixmatch_cat_two_loaders_r19": "LOUD",
    "bucket_batch_sampler_r19": "MATCH",
    "iterable_stream_r19": "MATCH",
    # round 21 red team (language, retrieval, recommendation): DPR's and
    # sentence-transformers' in-batch negatives (a helper's tuple, a loss class
    # in losses.py), a hidden state made with the configured batch size (3 were
    # SILENT before); BPR negatives, minGPT's token-driven schedule, a
    # Transformer with greedy decoding
    "dpr_in_batch_negatives_r21": "FLAGGED",
    "sbert_mnrl_r21_project": "FLAGGED",
    "sbert_mnrl_r21_project_batch": "FLAGGED",
    "stateful_lm_loader_r21": "FLAGGED",
    "bpr_embbag_negatives_r21": "FLAGGED",
    "mingpt_token_lr_decay_r21": "FLAGGED",
    "transformer_greedy_decode_r21": "MATCH",
    # round 20 red team (GANs, VAEs, image trainers): RaGAN's batch-mean logit,
    # a VQ-VAE's EMA codebook through .data, an np.add.at confusion matrix, a
    # Beta-VAE's module-level reparametrize, StyleGAN2's lazy R1 (5 were SILENT
    # before); soft noisy labels, distillation with hand-made smoothing
    "ragan_relativistic_mean_r20": "FLAGGED",
    "vqvae_ema_codebook_r20": "FLAGGED",
    "cifar_amp_tta_confusion_r20": "FLAGGED",
    "beta_vae_solver_anneal_r20": "FLAGGED",
    "stylegan2_lazy_r1_r20": "MATCH",
    "stylegan2_path_length_reg_r20": "FLAGGED",
    "gan_soft_noisy_labels_r20": "MATCH",
    "kd_trainer_smoothing_r20": "MATCH",
    # round 22a red team (optimizer and backward shapes): L-BFGS deciding on the
    # closure's per-rank loss (SILENT before: ranks diverged and one hung), reentrant
    # checkpointing of a weight-shared block (SILENT before: DDP's own error), top-1
    # routing that leaves an expert unused on one process only (SILENT before)
    "lbfgs_closure_r22": "MATCH",
    "checkpoint_shared_layer_r22": "LOUD",
    "nonfinite_skip_r22": "FLAGGED",
    # (FLAGGED until round 23b: DDP's own error at the second step; the runtime
    # now averages a model that takes two backward passes per forward itself)
    "retain_graph_two_backward_r22": "MATCH",
    "aux_head_alternate_r22": "MATCH",
    "manual_sgd_clamp_r22": "MATCH",
    "contractive_ae_jacobian_r22": "FLAGGED",
    # an expert no sample of a process's share picks (SILENT before: gloo aborted in
    # a mismatched collective); AM039 leaves the file unchanged
    "moe_top1_routing_r22": "FLAGGED",
    # a box term added only on batches with positives (SILENT before: gloo aborted);
    # AM028 now reports a loss assigned on one side of a rank-local branch
    "positive_guard_box_loss_r22": "FLAGGED",
    "nonfinite_grad_norm_skip_r22": "MATCH",
    "dann_grad_reversal_r22": "MATCH",
    # PCGrad's torch.autograd.grad written into p.grad (SILENT before: no process
    # averaged the gradients); the first step raises UnsyncedGradientsError
    # (LOUD until round 23b: the first step raised UnsyncedGradientsError; AM040
    # now reports torch.autograd.grad over the parameters before anything runs)
    "pcgrad_autograd_grad_r22": "FLAGGED",
    # round 22c (reach across files): a Trainer subclass over another file's
    # base that builds the optimizer (LOUD in both modes before: the loaders were
    # sharded for an unprepared model), and loaders handed by keyword in a dict
    # to engine.train(), which builds the optimizer (SILENT in file mode before:
    # left unmigrated with no finding; LOUD in batch mode: engine.py migrated on
    # the word of a main.py that prepared nothing)
    "subclass_base_trainer_r22_project": "FLAGGED",
    "subclass_base_trainer_r22_project_batch": "FLAGGED",
    "kwarg_loader_dict_r22_project": "FLAGGED",
    "kwarg_loader_dict_r22_project_batch": "FLAGGED",
    # a subclass in main.py writing only training_step over a base whose loop
    # runs the backward (SILENT in file mode before: main.py's loaders sharded
    # while each process trained a full copy in core/trainer.py)
    "training_step_base_loop_r22_project": "FLAGGED",
    "training_step_base_loop_r22_project_batch": "FLAGGED",
    # a model class of models.py shaping its input with the cfg.batch_size it
    # stores (SILENT in both modes before: the reshape crashed at world 2)
    "cfg_batch_shape_model_r22_project": "FLAGGED",
    "cfg_batch_shape_model_r22_project_batch": "FLAGGED",
    "star_imports_r22_project": "MATCH",
    "star_imports_r22_project_batch": "MATCH",
    "csv_logger_sibling_r22_project": "FLAGGED",
    "csv_logger_sibling_r22_project_batch": "MATCH",
    # loaders handed in a dict by keyword to a training file's function, which
    # hands loaders["val"] on (FLAGGED with a false reason before: the eval
    # sums in engine.py were not reduced, and only build.py's AM004 was said)
    "loader_dict_engine_r22_project": "FLAGGED",
    "loader_dict_engine_r22_project_batch": "MATCH",
    "pkg_registry_engine_r22_project": "FLAGGED",
    "pkg_registry_engine_r22_project_batch": "LOUD",
    # round 22b red team (state each process computes from its share): Glow's
    # ActNorm parameters set from the first batch, an induced subgraph
    # adj[batch][:, batch], SwAV's Sinkhorn codes in a no-grad helper, a running
    # target mean/var rebound in the loop, LSUV on next(iter(train_loader)) (4
    # of them SILENT before, SwAV flagged for its print only); DINO's centre,
    # Mean Teacher with confident pseudo-labels, DDPM with an EMA sampler, MTAN's
    # Dynamic Weight Average (AM019 named a false cause before)
    "glow_actnorm_init_r22": "FLAGGED",
    "gcn_induced_subgraph_r22": "FLAGGED",
    "swav_sinkhorn_prototypes_r22": "FLAGGED",
    "target_running_norm_r22": "FLAGGED",
    "dino_center_teacher_r22": "FLAGGED",
    "mean_teacher_confident_pl_r22": "FLAGGED",
    "ddpm_ema_sampler_r22": "MATCH",
    "lsuv_init_batch_r22": "FLAGGED",
    "mtan_dwa_weights_r22": "FLAGGED",
    "hard_negative_queue_script_r22": "FLAGGED",
    "pseudo_label_warmup_r22": "FLAGGED",
    # the siamese-triplet layout, from a new-user trial (SILENT in both modes
    # before: the loss module handed to trainer.fit's loss_fn parameter mines
    # its triplets over the batch and was taken for a mean); AM007 now reads the
    # class behind the parameter and its rows picked by the miner's indices
    "online_triplet_selector_r22t_project": "FLAGGED",
    "online_triplet_selector_r22t_project_batch": "FLAGGED",
    # round 22 trial (a new user's real public scripts): the text classification
    # tutorial's test loss, whose name is rebound each batch before its `+=`
    # (SILENT before: AM009 combined it as a running sum)
    "textcls_rebound_loss_r22t": "FLAGGED",
    # and the Variable-era DCGAN's buffers made with the configured batch size,
    # resized through `.data` (SILENT before: AM025 saw no shape in a step) or
    # on the tensors themselves (harmless)
    "dcgan_variable_buffers_r22t": "FLAGGED",
    "dcgan_resized_buffers_r22t": "MATCH",
    # round 23l: random draws and weights in other files and helpers
    "cyclegan_replay_utils_r23l_project": "FLAGGED",
    "cyclegan_replay_utils_r23l_project_batch": "FLAGGED",
    "vae_models_r23l_project": "FLAGGED",
    "vae_models_r23l_project_batch": "FLAGGED",
    "vae_kld_row_weight_r23l": "FLAGGED",
    "vae_kld_method_weight_r23l": "FLAGGED",
    # round 23t: real public training scripts of several files, each in both
    # modes. The captioning collate_fn sorts the batch in place (LOUD before: the
    # runtime could not check the split of the sorted global batch); the
    # akamaster trainer's `batch_time.update(time.time() - end)` meters and its
    # `loss = loss.float()` before `losses.update(loss.item(), n)` (FLAGGED
    # before, for those: the val loss meter was left per-process)
    "image_captioning_r23t_project": "MATCH",
    "image_captioning_r23t_project_batch": "MATCH",
    "stargan_solver_r23t_project": "FLAGGED",
    "stargan_solver_r23t_project_batch": "FLAGGED",
    "fast_neural_style_r23t_project": "MATCH",
    "fast_neural_style_r23t_project_batch": "MATCH",
    "srgan_r23t_project": "MATCH",
    "srgan_r23t_project_batch": "MATCH",
    "snli_bucket_iter_r23t_project": "MATCH",
    "snli_bucket_iter_r23t_project_batch": "MATCH",
    "resnet_cifar_dict_arch_r23t_project": "MATCH",
    "resnet_cifar_dict_arch_r23t_project_batch": "MATCH",
    # StarGAN's InstanceNorm(track_running_stats=True) evaluated in eval mode
    # (SILENT before: the running statistics were the main process's share's)
    "instancenorm_running_stats_r23t": "MATCH",
    # round 23b red team (gradients the DDP runtime cannot see, issue 12):
    # manual SGD and a meta step over the whole batch through
    # torch.autograd.grad(loss, params) (SILENT before: nothing averaged those
    # gradients; AM040), second-order MAML per task (sound, migrated), two
    # backwards on one graph (a GAN without detach, an auxiliary loss first,
    # which crashed in DDP's reducer: the runtime now averages them), and a
    # model class of another file that runs a submodule only when its batch
    # says so (SILENT in both modes before: DDP
    # aborted or timed out; AM039 reads HelperFact.data_branch)
    "autograd_grad_sgd_r23b": "FLAGGED",
    "maml_batch_task_r23b": "FLAGGED",
    "maml_sine_tasks_r23b": "MATCH",
    "gan_retain_shared_fake_r23b": "MATCH",
    "aux_loss_retain_first_r23b": "MATCH",
    "cascade_refine_model_r23b_project": "FLAGGED",
    "cascade_refine_model_r23b_project_batch": "FLAGGED",
    "bn_guard_model_r23b_project": "FLAGGED",
    "bn_guard_model_r23b_project_batch": "FLAGGED",
    # Round 23a (issue 12): dropout of a model class of another module (SILENT
    # before in both modes: AM027 read the script's own classes only; now its
    # info finding names them and the runs are equal with them off) ...
    "mingpt_dropout_r23_project": "FLAGGED",
    "mingpt_dropout_r23_project_batch": "FLAGGED",
    "cifar_dropout_head_r23_project": "FLAGGED",
    "cifar_dropout_head_r23_project_batch": "FLAGGED",
    "cfg_dropout_layers_r23_project": "FLAGGED",
    "cfg_dropout_layers_r23_project_batch": "FLAGGED",
    # ... and GAN targets made before the loop with the configured batch size
    # (SILENT before: torch's size error at world 2; AM025 names them now), one
    # whose broadcast keeps the losses
    "gan_prebuilt_labels_r23": "FLAGGED",
    "gan_class_labels_r23": "FLAGGED",
    "dcgan_resize_configured_r23": "FLAGGED",
    "lsgan_full_labels_r23": "MATCH",
    # round r24b (issue 12): samples saved from a batch taken once off a sharded
    # loader (SILENT before: the saved files held the main process's rows; AM041)
    "ae_fixed_recon_r24b": "FLAGGED",
    "pix2pix_fixed_iter_r24b_project": "FLAGGED",
    "pix2pix_fixed_iter_r24b_project_batch": "FLAGGED",
    # ... and SimCLR's labels and mask made once from an alias and a multiple of
    # the batch size (SILENT before: torch's size error, AM007 only; AM025 now)
    "simclr_ntxent_labels_r24b": "FLAGGED",
    # round r23c: a training setup spread over helper modules (issue 12)
    "timm_optim_factory_r23c_project": "MATCH",
    "timm_optim_factory_r23c_project_batch": "MATCH",
    "count_correct_helpers_r23c_project": "MATCH",
    "count_correct_helpers_r23c_project_batch": "MATCH",
    "imagenet_engine_topk_r23c_project": "FLAGGED",
    "imagenet_engine_topk_r23c_project_batch": "MATCH",
    "batch_mean_metric_r23c_project": "MATCH",
    "batch_mean_metric_r23c_project_batch": "MATCH",
    "optimizer_class_lookup_r23c_project": "MATCH",
    "optimizer_class_lookup_r23c_project_batch": "MATCH",
    # round r24a: cross-file reach gaps (issue 12), all SILENT before: a
    # row-count KL weight handed to a method of models.py's class (AM007 now),
    # draws inherited from a base class of another module (AM020 now), a model
    # picked by name among a package's (AM027 names the candidates with
    # dropout) ...
    "vae_kld_weight_models_r24a_project": "FLAGGED",
    "vae_base_forward_r24a_project": "FLAGGED",
    "noisy_dataset_base_r24a_project": "FLAGGED",
    "imagenet_arch_dict_r24a_project": "FLAGGED",
    # ... and a model handed to a local optimizer factory then to engine.py's
    # step (FLAGGED before with its engine.py as written: AM004 refused it)
    "registry_optim_factory_r24a_project": "MATCH",
    "engine_no_torch_r24l_project": "MATCH",
    "forward_backward_helper_r24l_project": "FLAGGED",
    "forward_backward_helper_r24l_project_batch": "MATCH",
    # round 24t: real public vision projects of several files, each in both
    # modes. The VQ-VAE's reconstructions of a fixed batch taken with
    # next(iter(test_loader)) from a sharded loader (SILENT before: AM006 now
    # reports it); the DDPM's get_data returning a rebound `val_dataset` loader
    # (FLAGGED before for a false "tuple of other values") and its timesteps
    # drawn by a method with a count parameter (AM034 now); SimCLR's trainer
    # taking its model out of **kwargs (FLAGGED before by an unrelated AM017
    # only, in file mode: AM004 now)
    "srcnn_psnr_r24t_project": "MATCH",
    "srcnn_psnr_r24t_project_batch": "MATCH",
    "vqvae_straight_through_r24t_project": "FLAGGED",
    "vqvae_straight_through_r24t_project_batch": "FLAGGED",
    "ddpm_conditional_ema_r24t_project": "MATCH",
    "ddpm_conditional_ema_r24t_project_batch": "MATCH",
    "simclr_info_nce_r24t_project": "FLAGGED",
    "simclr_info_nce_r24t_project_batch": "FLAGGED",
    "unet_dice_carvana_r24t_project": "FLAGGED",
    "unet_dice_carvana_r24t_project_batch": "FLAGGED",
    "protonet_episodes_r24t_project": "FLAGGED",
    "protonet_episodes_r24t_project_batch": "FLAGGED",
    # round 24u (issue 12): a new-user trial on real public projects. NCF's
    # candidate-list ranking (`torch.topk` over a test batch that is one
    # user's candidates) was LOUD in batch mode by accident (AM009 summed the
    # hits, AM029's gather refused the NDCG list): AM009 now names the ranking
    # and leaves the loop alone; Informer's `Exp = Exp_Informer` alias hid the
    # experiment class that trains in exp/ (file mode SILENT: "not a training
    # entry point"): ModuleIndex.helper follows a name bound once to it
    "ncf_hitrate_r24u_project": "FLAGGED",
    "ncf_hitrate_r24u_project_batch": "FLAGGED",
    "informer_exp_r24u_project": "FLAGGED",
    "informer_exp_r24u_project_batch": "FLAGGED",
    "textcnn_iterater_r24u_project": "FLAGGED",
    "textcnn_iterater_r24u_project_batch": "FLAGGED",
    "textcnn_iterater_direct_r25b_project": "MATCH",
    # teacher outputs precomputed per batch and indexed by batch number: file
    # mode's AM029 gathered the list whole while train_kd paired it with its
    # share (torch's size error, flagged only by unrelated findings); AM029
    # now leaves such a list alone (batch_indexed.py) and the run differs only
    # by evaluate.py's per-process accuracy, AM006's finding; batch mode is
    # left whole (AM103 over utils.py's Params.save, AM036)
    "kd_teacher_outputs_r24u_project": "FLAGGED",
    "kd_teacher_outputs_r24u_project_batch": "FLAGGED",
    # tkipf/pygcn: the whole graph as one batch, no DataLoader (every process
    # does the whole work; the gradients it averages are equal)
    "pygcn_fullgraph_r24u_project": "MATCH",
    "pygcn_fullgraph_r24u_project_batch": "MATCH",
    # ikostrikov's PPO: main.py hands the policy to `algo.PPO`, re-exported by
    # algo/__init__.py (file mode SILENT before: the project view did not
    # follow the re-export, so main.py was "not a training entry point"; now
    # AM004 names the class). The policy's forward raises NotImplementedError
    # (it runs through act()/evaluate_actions()): with the re-export followed,
    # batch mode migrated both files and the runtime stopped at the first step
    # (LOUD); AM042 now leaves main.py whole and AM103 ppo.py with it
    "ppo_rollout_storage_r24u_project": "FLAGGED",
    "ppo_rollout_storage_r24u_project_batch": "FLAGGED",
    # round 25a: a StarGAN-fork solver keeping its fixed batch on the instance
    # (`self.x_fixed, self.c_fixed = next(data_iter)` in build_model, saved by
    # sample() every sample_step): FLAGGED before too (AM006 at the take, AM041
    # at the write); now one AM041 finding at the take names the write
    "solver_attr_fixed_batch_r25a_project": "FLAGGED",
    # Round 25c: six PyTorch-GAN implementations. BEGAN's balance `k` updated
    # from this process's losses (AM032, true; with the real gamma and lambda_k
    # the per-process k stays within 1e-5 of the original's over 12 steps)
    "began_k_balance_r25c": "MATCH",
    # EBGAN: the pull-away term compares the batch's embeddings (AM007) and the
    # margin term is added on a per-process condition (AM028): left whole
    "ebgan_pullaway_r25c": "FLAGGED",
    # DRAGAN: the penalty's perturbation scaled by the batch's `X.std()` in
    # compute_gradient_penalty (AM007 did not follow the helper's return, nor
    # a std without a dim, before), drawn with np.random/torch.rand (AM020)
    "dragan_perturbed_gp_r25c": "FLAGGED",
    # Context encoder: random masks drawn in the dataset (AM020), samples of a
    # shuffled validation batch taken with next(iter(...)) (AM041)
    "context_encoder_r25c_project": "FLAGGED",
    "context_encoder_r25c_project_batch": "FLAGGED",
    # CoGAN: Dropout2d built by a `discriminator_block` function nested in
    # __init__ (SILENT before: AM027 read only a method's own calls)
    "cogan_coupled_r25c_project": "FLAGGED",
    "cogan_coupled_r25c_project_batch": "FLAGGED",
    # ESRGAN: the relativistic average loss (AM007); the pixel-only warm-up
    # with `continue` matches
    "esrgan_warmup_r25c_project": "FLAGGED",
    "esrgan_warmup_r25c_project_batch": "FLAGGED",
    # Round 25a, a fourth new-user trial on real public projects.
    # chrischute/real-nvp: dequantization noise drawn in the model's forward
    # (AM020 names it); the best test loss of a per-process AverageMeter picks
    # the checkpoint, so both modes are left whole (AM028)
    "realnvp_dequant_r25a_project": "FLAGGED",
    "realnvp_dequant_r25a_project_batch": "FLAGGED",
    # yanx27/Pointnet_Pointnet2_pytorch: the experiment folder is named from the
    # clock and the checkpoint it resumes from sets the epoch range, and the
    # per-process test accuracy picks best_model.pth (AM028: left whole)
    "pointnet_cls_r25a_project": "FLAGGED",
    "pointnet_cls_r25a_project_batch": "FLAGGED",
    # fangpin/siamese-pytorch: random pairs in __getitem__ (AM020), and each test
    # batch is one N-way trial scored by np.argmax over the batch; the test set
    # keeps the trial's first image across items, so process 1 (whose share of
    # a trial starts past it) stops on a None. Before: AM009 summed the
    # per-process `right` counts and then reduced `right / (right + error)` a
    # second time; AM009 now names the trial (metrics/batch_ranking.py) and
    # leaves a ratio of a nested loop's sums alone
    "siamese_oneshot_r25a_project": "FLAGGED",
    "siamese_oneshot_r25a_project_batch": "FLAGGED",
    # the same with seeded pairs: batch mode was SILENT (the trial's argmax over
    # each process's share, the counts summed and their ratio summed again);
    # FLAGGED (AM009) after round 25; MATCH since round 27 (AM006 leaves the
    # unshuffled test loader whose trials are ranked whole: every process
    # scores every trial, as the original did)
    "siamese_seeded_pairs_r25a_project": "MATCH",
    "siamese_seeded_pairs_r25a_project_batch": "MATCH",
    # cedrickchee/capsule-net-pytorch: the loaders come back through two helper
    # levels (utils.load_data returns load_mnist's). MATCH before only because
    # neither mode sharded them (every process trained on every batch); the
    # project view now follows the chain, AM006 shards them, and the routing
    # logits' batch mean in capsule_layer.py is each share's (AM037 names it)
    "capsnet_routing_r25a_project": "FLAGGED",
    "capsnet_routing_r25a_project_batch": "FLAGGED",
    # the same with its loaders from utils.load_mnist (sharded): the routing's
    # batch mean in capsule_layer.py made the losses differ, FLAGGED only by
    # unrelated findings; AM037 now reads models of other local modules
    # (HelperFact.batch_mixing) and names it at `Net(...)`
    "capsnet_sharded_loaders_r25a_project": "FLAGGED",
    "capsnet_sharded_loaders_r25a_project_batch": "FLAGGED",
    # Adoni/word2vec_pytorch: no DataLoader, numpy negatives, sparse embeddings.
    # Batch mode was SILENT (FileNotFoundError: the corpus written on the main
    # process only, opened by input_data.py's InputData on every process before
    # it existed); AM017 now counts a path handed to a project class after the
    # write as read back and puts a barrier after the `with` that writes it
    "word2vec_sgns_r25a_project": "MATCH",
    "word2vec_sgns_r25a_project_batch": "MATCH",
    # jidasheng/bi-lstm-crf with a dev entity-F1: the per-process F1 picks the
    # saved model (AM028: left whole). The size-weighted validation loss is a
    # comprehension over the loader, which the divergence analysis now reads as
    # rank-local (AM033/AM028 name what is computed from it)
    "bilstm_crf_ner_r25a_project": "FLAGGED",
    "bilstm_crf_ner_r25a_project_batch": "FLAGGED",
    # round 25b (issue 12): a new-user trial on six more real public projects.
    # Deep SVDD's main.py only builds DeepSVDD, whose train builds optim/'s
    # DeepSVDDTrainer (file mode SILENT before: "not a training entry point";
    # relayed_trainers now names both classes, AM004); in batch mode
    # TorchvisionDataset.loaders() was prepared while the trainers were left
    # whole (each process trained its own copy; AM006 now leaves it whole)
    "deep_svdd_center_r25b_project": "FLAGGED",
    "deep_svdd_center_r25b_project_batch": "FLAGGED",
    # PyTorch-BYOL: batch mode SILENT before (rank 1 loaded runs/.../model.pth
    # before the main process wrote it: AM017 now puts a barrier after
    # trainer.train(...); and the linear probe's `list(encoder.children())[:-1]`
    # of a prepared model kept nothing: AM043); file mode FLAGGED before by an
    # unrelated AM017 only, AM004 now names BYOLTrainer (its step runs the
    # handed network in self.update)
    "byol_ema_linear_eval_r25b_project": "FLAGGED",
    "byol_ema_linear_eval_r25b_project_batch": "MATCH",
    # TransE-PyTorch: batch mode SILENT while being fixed (the logged
    # `loss.mean().item()` was the main process's share's: AM008 now); its
    # size=x.size() corruption draws (AM034) and hit_at_k sums (AM009) were
    # needs-review before
    "transe_filtered_rank_r25b_project": "MATCH",
    "transe_filtered_rank_r25b_project_batch": "MATCH",
    # world-models: MDRNN latents viewed as (BSIZE, SEQ_LEN, LSIZE) (AM025);
    # AM007 no longer takes get_loss's dict for a Hugging Face model's loss
    "world_models_vae_mdrnn_r25b_project": "FLAGGED",
    "world_models_vae_mdrnn_r25b_project_batch": "FLAGGED",
    "crnn_ctc_converter_r25b_project": "FLAGGED",
    "crnn_ctc_converter_r25b_project_batch": "FLAGGED",
    # pytorch-deeplab-xception: file mode was left whole by AM006 (a tuple of
    # loaders with None and the class count); prepared now
    # (accel.prepare_dataloaders), its build_loss criterion divides by the
    # share's row count, which AM007 names (an unknown reduction)
    "deeplab_trainer_poly_r25b_project": "FLAGGED",
    "deeplab_trainer_poly_r25b_project_batch": "FLAGGED",
    # round t7c: a new-user trial on six more real public projects.
    # rixwew/pytorch-fm: predictions gathered in order for a hand-written AUC
    # (AM029), EarlyStopper saving the whole model on the best AUC
    "deepfm_ctr_auc_t7c_project": "MATCH",
    "deepfm_ctr_auc_t7c_project_batch": "MATCH",
    # pyg reddit.py: NeighborSampler, a DataLoader subclass of sampler.py, is
    # not prepared (AM019): every process trains on every batch, equal draws
    "graphsage_neighbor_sampler_t7c_project": "MATCH",
    "graphsage_neighbor_sampler_t7c_project_batch": "MATCH",
    # sfujim/TD3: file mode leaves main.py whole (AM004 names TD3 in TD3.py).
    # Batch mode was SILENT (FileExistsError: main.py, which only calls
    # policy.train of the migrated TD3.py, was skipped as "not a training
    # entry point", so its `if not os.path.exists: os.makedirs` raced); main.py
    # is now migrated as the driver of a migrated trainer (drives_trainer), and
    # only TD3.save, the method that writes, is followed by a barrier
    # (method_writes: not select_action or train)
    "td3_replay_soft_update_t7c_project": "FLAGGED",
    "td3_replay_soft_update_t7c_project_batch": "MATCH",
    # kamalesh0406/Audio-Classification: SpecAugment masks drawn with `random`
    # in AudioDataset.__getitem__, the loader built by datasetaug's
    # fetch_dataloader. File mode was flagged only by AM006 (validate.py's
    # correct/total), which hid a SILENT cause: with the evaluation reduced
    # the losses differed and nothing named the draws; AM020 now reads the
    # dataset classes a loader factory builds (loader_sample_draws)
    "esc50_specaug_folds_t7c_project": "FLAGGED",
    "esc50_specaug_folds_t7c_project_batch": "FLAGGED",
    # yjxiong/tsn-pytorch: random segment offsets (AM020). SGD over
    # get_optim_policies() groups left it whole before (AM004); a model
    # method handing back groups of its own parameters is followed now
    # (param_group_methods), and the model is prepared
    "tsn_multiclip_t7c_project": "FLAGGED",
    "tsn_multiclip_t7c_project_batch": "FLAGGED",
    # the same over model.parameters(): test_models.py's strip of the
    # `module.` prefix crashed the migrated run (load_state_dict), FLAGGED
    # only by unrelated findings; AM003 now writes the original's keys for a
    # model every run wraps in DataParallel (data_parallel_keys)
    "tsn_dp_keys_t7c_project": "FLAGGED",
    "tsn_dp_keys_t7c_project_batch": "FLAGGED",
    # microsoft/human-pose-estimation.pytorch: random flips in JointsDataset
    # (AM020). Batch mode was left whole before (AM004: get_optimizer's
    # `optimizer = None` then one per branch was of no known kind); it is an
    # optimizer factory now, and AM009 names all_preds filled by a running idx
    "pose_heatmap_flip_t7c_project": "FLAGGED",
    "pose_heatmap_flip_t7c_project_batch": "FLAGGED",
    # round 26b: what the last trials left. An evaluation loop's printed batch
    # mean that is not a loss (SILENT before: each process printed its share's;
    # AM008 now makes it the global batch's), crnn's val() counting matches over
    # `next(val_iter)` batches (SILENT before: AM009 read only loops over a
    # loader), a step through the model's own `loss` method (LOUD before: AM042
    # now names it and leaves the file unchanged), the configured batch size
    # rebound in a GAN step (reported by AM025 already; it matches: every
    # process draws the same noise)
    "eval_batch_mean_print_r26b": "MATCH",
    "crnn_val_next_iter_r26b": "MATCH",
    "bilstm_crf_loss_method_r26b_project": "FLAGGED",
    "gan_rebound_batch_size_r26b": "MATCH",
    # t7a (new-user trial): locuslab/robust_overfitting, PGD adversarial training
    # with a uniform random start drawn in utils.attack_pgd (AM020 in batch mode;
    # file mode leaves main.py whole: attack_pgd runs backward on the model, AM004).
    # Batch mode also showed two false findings before: AM019 on attack_pgd's
    # `X[index, :, :, :]` (a bare `:` is no slice of stored data) and AM008 on the
    # test loop's own `robust_loss.item()` (a name that loop assigns anew)
    "pgd_robust_ckpt_t7a_project": "FLAGGED",
    "pgd_robust_ckpt_t7a_project_batch": "FLAGGED",
    # kuc2477/pytorch-ewc: the optimizer is built in train.py over the model main.py
    # hands it, which file mode does not follow (AM004). Batch mode follows it
    # (r34b) and prepared the model, whose `consolidate` (run by train.py after
    # each task) registers buffers: LateRegistrationError at run time (LOUD).
    # AM004 names that now (fixr), and AM103 the batch's others (cause AM004)
    "ewc_fisher_tasks_t7a_project": "FLAGGED",
    "ewc_fisher_tasks_t7a_project_batch": "FLAGGED",
    # rahulvigneswaran/Lottery-Ticket-Hypothesis: the printed Loss is the last
    # batch's, returned by train() (AM008). File mode crashed before (rank 1's
    # `all_loss.dump(path)` into a folder only the main process made, with no
    # finding naming it): AM017 now moves ndarray.dump/tofile to the main process
    "lottery_imp_rewind_t7a_project": "FLAGGED",
    "lottery_imp_rewind_t7a_project_batch": "FLAGGED",
    # quark0/darts: the architecture weights are plain tensors with
    # requires_grad, stepped by the Architect's Adam on a search-split batch.
    # Batch mode was LOUD by accident before (migrated, then the runtime stopped
    # `model._loss(...)`; had it run, the alphas' gradients were never averaged):
    # AM045 now leaves the setup whole; file mode: AM004 (Architect) and AM045
    "darts_search_t7a_project": "FLAGGED",
    "darts_search_t7a_project_batch": "FLAGGED",
    # the same with the alphas registered as nn.Parameter: batch mode was LOUD
    # (the runtime's "received gradients but was never called": the Architect
    # backpropagates `self.model._loss(...)`, a method of the model of
    # model_search.py that runs `self(input)` past the prepared wrapper); AM042
    # now follows the model main.py hands Architect to its class and leaves
    # the setup whole; file mode: AM004 (Architect)
    "darts_param_alphas_r27a_project": "FLAGGED",
    "darts_param_alphas_r27a_project_batch": "FLAGGED",
    # gabrielhuang/reptile-pytorch: do_evaluation takes its batches with
    # next(test_iter) from an endless generator around the sharded loader and
    # averages per-process losses/accuracies (np.mean). SILENT before (only an
    # unrelated AM008): AM009 now reports collections in such loops
    # (metrics/next_batches.py). Round t12b: the index sees through
    # make_infinite (it yields each batch of the loader), so the loop reads the
    # loader's batches and AM009 makes each collected batch mean the whole
    # batch's (accel.global_loss): MATCH
    "reptile_clone_interp_t7a_project": "MATCH",
    "reptile_clone_interp_t7a_project_batch": "MATCH",
    # the same with one test shot per class: the meta-test batch of 3 rows
    # splits 2/1 and its pass stays open while the next task's batches split
    # 2/2; the next backward raises ShardingError (different shares since the
    # last backward): the runtime cannot tell from the order of the passes
    # that the test batch never reaches that loss (weighing only the passes
    # the loss's graph reaches was tried in r27a and dropped: pseudo-labels
    # from a no-grad or detached forward were then weighed wrongly, silently);
    # the message names the open evaluation pass and its fixes
    "reptile_odd_eval_r27a_project": "LOUD",
    "reptile_odd_eval_r27a_project_batch": "LOUD",
    # ermongroup/ncsn: batch mode was FLAGGED for a false reason before (AM028
    # took `for i, sample in enumerate(all_samples)`, one torch.save per annealed
    # Langevin sample, for a rank-dependent decision and left the batch whole;
    # the list's length is fixed by loops every process runs alike:
    # uniform_lengths.py). Now migrated; it differs by the noise
    # `torch.randn_like` draws in losses/dsm.py (AM020); file mode: AM004
    "ncsn_anneal_dsm_t7a_project": "FLAGGED",
    "ncsn_anneal_dsm_t7a_project_batch": "FLAGGED",
    # t7b, a new user's trial of six unseen families. open_clip: file mode leaves
    # main.py whole (train_one_epoch trains in train.py, AM004); batch mode
    # matches, but only because get_data's DataInfo(dataloader) hides the
    # loaders, which stay unsharded (every process trains on the whole batch)
    "clip_zeroshot_t7b_project": "FLAGGED",
    "clip_zeroshot_t7b_project_batch": "MATCH",
    # barlowtwins: SILENT in both modes before (the cross-correlation
    # bn(z1).T @ bn(z2) sums over each process's share; AM037 now names a
    # matrix product over dimension 0, batch_contractions)
    "barlow_twins_lars_t7b_project": "FLAGGED",
    "barlow_twins_lars_t7b_project_batch": "FLAGGED",
    # MAE: the per-sample random masking draws in models_mae.py are not named
    # (the backward runs in util/misc.py's NativeScaler.__call__, so
    # engine_pretrain.py's loop is not seen as a training step); the findings
    # given are true (AM006/AM017 file mode; AM009 on MetricLogger in batch)
    "mae_random_masking_t7b_project": "FLAGGED",
    "mae_random_masking_t7b_project_batch": "FLAGGED",
    # BERT MLM: batch mode SILENT before (the masking collator of
    # dataset/collate.py given as collate_fn draws per process: AM020 now)
    "bert_mlm_collate_t7b_project": "FLAGGED",
    "bert_mlm_collate_t7b_project_batch": "FLAGGED",
    # nerf-pytorch: no loader, rays sliced from a tensor (AM019); AM008's false
    # "this process's share" findings on psnr/test_psnr are gone
    "nerf_ray_batching_t7b_project": "MATCH",
    "nerf_ray_batching_t7b_project_batch": "MATCH",
    # pixelcnn: AM008's false "loss read outside the loop of its backward" on
    # the test loop's err_te.append(loss.item()) (AM009 combines it) is gone
    "pixelcnn_sampling_t7b_project": "MATCH",
    "pixelcnn_sampling_t7b_project_batch": "MATCH",
    # t8b, a new user's trial of six more families. PyTorch-YOLOv3: the loss is
    # item 0 of what utils/loss.py's compute_loss returns (its box term a mean
    # over the targets matched to anchors, a per-process count); file mode was
    # FLAGGED for a false reason before (only the logged loss components and the
    # validation loader were named; the loss was weighed as a per-sample mean):
    # AM007 now reports an unpacked item of another module's function whose
    # reduction the project view cannot read (reduction/helper_items.py). Batch
    # mode: test.py's early return on an empty detection list (AM028)
    "yolov3_build_targets_t8b_project": "FLAGGED",
    "yolov3_build_targets_t8b_project_batch": "FLAGGED",
    # RAFT: sequence_loss's metrics (EPE and 1/3/5px over the batch's valid
    # pixels) handed to Logger.push, which keeps running sums printed every
    # SUM_FREQ steps. FLAGGED for a false reason before in both modes (AM014
    # took fetch_optimizer's returned optimizer for an unknown one; AM020 on
    # draws under the disabled --add_noise): AM009 now reports values handed to
    # a keeping method of the file's class (metrics/state_methods.py), AM014
    # follows optimizers returned by the file's functions
    "raft_sequence_loss_t8b_project": "FLAGGED",
    "raft_sequence_loss_t8b_project_batch": "FLAGGED",
    # EDSR-PyTorch: the Trainer of trainer.py trains (file mode: AM004); batch
    # mode leaves the setup whole for the methods that write files
    # (checkpoint.save, Loss.save: AM036)
    "edsr_chop_psnr_t8b_project": "FLAGGED",
    "edsr_chop_psnr_t8b_project_batch": "FLAGGED",
    # NVIDIA/tacotron2: its own distributed path (DistributedSampler,
    # reduce_tensor, apply_gradient_allreduce) under `if distributed_run:`:
    # already distributed, left unchanged (AM100)
    "tacotron2_pad_collate_t8b_project": "MATCH",
    "tacotron2_pad_collate_t8b_project_batch": "MATCH",
    # WaveNet: chunks at np.random offsets in the Dataset (AM020); the samples
    # generated after training (torch.multinomial) match once the offsets are
    # fixed (checked by hand)
    "wavenet_mulaw_generate_t8b_project": "FLAGGED",
    "wavenet_mulaw_generate_t8b_project_batch": "FLAGGED",
    # monodepth2: file mode AM004 (the Trainer of trainer.py); batch mode
    # migrates it and crashes in BackprojectDepth(batch_size), named by AM025
    "monodepth2_automask_t8b_project": "FLAGGED",
    "monodepth2_automask_t8b_project_batch": "FLAGGED",
    # t8c (new-user trial): Diego999/pyGAT, full-graph GAT with a patience
    # counter, `{epoch}.pkl` snapshots pruned with glob + os.remove (main process
    # only) and the best one loaded back; every process runs the whole graph
    # (AM019 says the work is not divided), so it matches
    "gat_cora_patience_t8c_project": "MATCH",
    "gat_cora_patience_t8c_project_batch": "MATCH",
    # pmixer/SASRec.pytorch: an in-process sampler drawing users and negatives
    # with np.random, NDCG@10/HR@10 over random.sample'd users; every process
    # draws the same batch. Its `T += time.time() - t0` total was reported by
    # AM033 as a share of the batch before (clock_readings now follows `+=`)
    "sasrec_sampled_ndcg_t8c_project": "MATCH",
    "sasrec_sampled_ndcg_t8c_project_batch": "MATCH",
    # hcnoh/knowledge-tracing-collection-pytorch: the model trains itself
    # (DKT.train_model(train_loader, test_loader, num_epochs, opt, ckpt_path)
    # calls self(q, r) and loss.backward()). LOUD by accident before in file mode
    # (main.py prepared, the runtime's UnsyncedGradientsError at the first step);
    # AM042 now leaves main.py whole and says why (layer_methods.training_methods)
    "dkt_masked_auc_t8c_project": "FLAGGED",
    "dkt_masked_auc_t8c_project_batch": "FLAGGED",
    # pytorch/examples reinforce.py with a numpy CartPole in envs.py: one episode
    # per step, every process plays the same episode (same seeds), so it matches
    "reinforce_cartpole_t8c_project": "MATCH",
    "reinforce_cartpole_t8c_project_batch": "MATCH",
    # weihua916/powerful-gnns (ten folds looped in main.py): batches picked out of
    # train_graphs by np.random.permutation indices, so every process trains on
    # the same whole batch and the runtime's sync batch norm counts it twice (its
    # running variance, hence the eval accuracies, differ). Before: no finding
    # named it (FLAGGED only through unrelated AM007/AM017); AM019 now reports
    # the drawn pick (drawn_batches) and the case pins it as the cause
    "gin_graph_kfold_t8c_project": "FLAGGED",
    "gin_graph_kfold_t8c_project_batch": "FLAGGED",
    # laiguokun/LSTNet: the optimizer is built inside Optim.Optim (Optim.py), a
    # wrapper handed model.parameters(), and the model comes from
    # eval(args.model).Model(...): AM004 leaves main.py whole. Its message
    # pointed at the `def train(...)` line as "where it is built"; it now names
    # the wrapper the parameters go to and says `model` is train()'s parameter
    "lstnet_data_utility_t8c_project": "FLAGGED",
    "lstnet_data_utility_t8c_project_batch": "FLAGGED",
    # chsong513/DeepKnowledgeTracing-DKT-Pytorch: the loop in evaluation/eval.py,
    # a loss summed over students and answered steps, the test set's answered
    # steps gathered with torch.cat for one AUC. File mode: AM004 (trained in
    # eval.py). Batch mode matches: getLoader hands its loaders back in lists,
    # which are not sharded, so every process trains on all of it (no finding
    # says the work is not divided: see the t8c report)
    "dkt_student_loop_auc_t8c_project": "FLAGGED",
    "dkt_student_loop_auc_t8c_project_batch": "MATCH",
    # LSTNet's forks that name the model class directly: migrated in both modes
    # (the Optim wrapper's own optimizer is left as it is; the get_batches
    # generator is not sharded, every process draws the same randperm) and it
    # matches. Extended: it repeats lstnet_data_utility_t8c_project's layout
    "lstnet_direct_model_t8c_project": "MATCH",
    "lstnet_direct_model_t8c_project_batch": "MATCH",
    # t9c, a new user's trial of six more families.
    # ServiceNow/N-BEATS: trainer() in experiments/trainer.py trains the model
    # it is handed (`model = model.to(default_device())`, its own Adam, next()
    # on the TimeseriesSampler generator): left whole in both modes (AM004;
    # batch mode also AM036 for SnapshotManager.register's saves)
    "nbeats_sampler_t9c_project": "FLAGGED",
    "nbeats_sampler_t9c_project_batch": "FLAGGED",
    # locuslab/TCN pmnist_test.py: a fixed np.random permutation of the pixel
    # sequence, clipping, a summed test loss over len(dataset) and lr /= 10 by
    # hand when it rises (fires once at epoch 3): migrated, matches
    "tcn_pmnist_lr_rule_t9c_project": "MATCH",
    "tcn_pmnist_lr_rule_t9c_project_batch": "MATCH",
    # zfjsail/gae-pytorch: edges split once with np.random (negatives drawn
    # once), full-graph VGAE training (randn_like in the reparameterisation,
    # the same draw on every process), ROC AUC/AP over the edge lists: matches
    # (AM007: loss_function's reduction is not read from its return)
    "vgae_link_pred_t9c_project": "MATCH",
    "vgae_link_pred_t9c_project_batch": "MATCH",
    # aditya-grover/node2vec walks + a PyTorch skip-gram (sparse nn.Embedding,
    # SparseAdam): the negatives of each batch are drawn in the loop with
    # torch.multinomial(noise, B * K), per process for its share (AM020, true);
    # save_embedding writes on every process (AM017)
    "node2vec_sparse_adam_t9c_project": "FLAGGED",
    "node2vec_sparse_adam_t9c_project_batch": "FLAGGED",
    # atulkum/pointer_summarizer: `self.model = Model(path)`, a plain
    # `class Model(object)` holding encoder/decoder/reduce_state, and one
    # Adagrad over their parameters. LOUD by accident before (AM004 wrapped the
    # holder: "prepare_model expects a torch.nn.Module, got Model"); the setup
    # is left whole now, AM004 naming the holder (holder_models)
    "pointer_gen_coverage_t9c_project": "FLAGGED",
    "pointer_gen_coverage_t9c_project_batch": "FLAGGED",
    # galsang/BiDAF-pytorch: test() swaps the EMA weights in, writes the answers
    # keyed by question id to args.prediction_file and calls evaluate.main(args),
    # which reads it back. SILENT before (flaky): the write was moved to the main
    # process with no barrier, as `args` handed on was not seen as handing the
    # path (rank 1 read a missing or half-written file: JSONDecodeError); AM017
    # now follows the object that holds the path and puts accel.barrier() after
    # the `with`. Matches in both modes
    "bidaf_ema_squad_t9c_project": "MATCH",
    "bidaf_ema_squad_t9c_project_batch": "MATCH",
    # BiDAF-pytorch's forks that build the DataLoaders in run.py (sharded):
    # SILENT in training before (flagged only by AM009 for the answers dict).
    # Two causes: the collate_fn returns a Batch object (batch.c_word,
    # batch.s_idx, batch.id), which the runtime could not split, so each
    # process padded its share to the share's longest (the runtime now splits
    # a record attribute by attribute: global padding); and utils/nn.py's LSTM
    # unpacks with pad_packed_sequence to its batch's longest, so the start/end
    # logits have the share's positions: AM037 now names it (share_padding).
    # The dev answers, a dict filled over the sharded dev loader, stay this
    # process's share (AM009)
    "bidaf_answers_sharded_t9c_project": "FLAGGED",
    "bidaf_answers_sharded_t9c_project_batch": "FLAGGED",
    # philipperemy/n-beats examples/trainer_pytorch.py: training in chunks, each
    # starting with load(net, optimiser) (os.path.exists + torch.load of the
    # checkpoint, grad_step resumed from it) and ending with save(...). SILENT
    # before in both modes: accel.save writes on the main process, and AM010
    # added no barrier since load() is defined above save() (line order), so
    # rank 1 resumed from no file or an older one (another grad_step, other
    # weights). A load in another function than the save now counts as a read
    # back: accel.barrier() follows the save, and it matches
    "nbeats_resume_steps_t9c_project": "MATCH",
    "nbeats_resume_steps_t9c_project_batch": "MATCH",
    # pyg-team/pytorch_geometric examples/node2vec.py (Node2Vec stand-in):
    # `loader = model.loader(...)` samples walks in its collate_fn and the step
    # backpropagates `model.loss(pos_rw, neg_rw)`, a method past the prepared
    # model's forward: left whole, AM042 says why (the gradients would not be
    # averaged)
    "node2vec_pyg_loader_t9c_project": "FLAGGED",
    "node2vec_pyg_loader_t9c_project_batch": "FLAGGED",
    # t10c, a new user's trial of RL, audio, time-series, scientific and
    # diffusion projects. pranz24/pytorch-soft-actor-critic: SAC(object) trains
    # its own critic/policy in sac.py (file mode AM004). Batch mode: its
    # `self.log_alpha = torch.zeros(1, requires_grad=True)` stepped by
    # `Adam([self.log_alpha])` was prepared, and the runtime stopped the run
    # (UnpreparedParametersError: LOUD by accident, in the variant without the
    # buffer's save/load); AM031 now reports a learnt tensor a prepared optimizer
    # steps, also without a loader and as an attribute of a plain class
    "sac_twin_q_alpha_t10c_project": "FLAGGED",
    "sac_twin_q_alpha_t10c_project_batch": "FLAGGED",
    "sac_memory_sample_t10c_project": "FLAGGED",
    "sac_memory_sample_t10c_project_batch": "FLAGGED",
    # descriptinc/melgan-neurips: best_netG.pt chosen on the per-process mean of
    # the costs (AM028), random.randint segments in AudioDataset.__getitem__ (AM020)
    "melgan_multiscale_fm_t10c_project": "FLAGGED",
    "melgan_multiscale_fm_t10c_project_batch": "FLAGGED",
    # zhykoties/TimeSeries (DeepAR): `from dataloader import *` hands main.py
    # torch's DataLoader through dataloader.py. MATCH before r29g only because
    # the codemod did not recognise it (the loaders stayed whole on every
    # process); the re-export is followed now (project_reexports), the loaders
    # are sharded and the run differs for two causes, pinned: net.loss_fn is a
    # mean over the labels that are not zero, a count each share has its own
    # of (AM007: reduction not known), and WeightedSampler.__iter__ draws the
    # epoch's order with torch.multinomial after evaluation drew Normal.sample()
    # per share, so the main process's random state is not the original's
    # (AM020). Batch mode is left whole for Params.save's json in a method
    # (AM036, AM103)
    "deepar_gaussian_lstm_t10c_project": "FLAGGED",
    "deepar_gaussian_lstm_t10c_project_batch": "FLAGGED",
    # jayroxis/PINNs Burgers identification: batch mode was SILENT (lambda_1
    # never trained): `self.dnn.register_parameter("lambda_1", ...)` on the
    # prepared DNN registered it on the runtime's wrapper, not the user's module,
    # so `self.dnn.parameters()` and the optimizers never saw it. PreparedModule
    # now registers parameters, buffers and submodules on the user's module
    # (before the wrapper is built at the first forward; after it, it refuses)
    # r32c: a registry whose values wrap the project's classes in
    # `functools.partial` and `lambda`; the default pick draws input noise in
    # its forward. Both values were dropped from the candidates, so the model
    # was prepared with no finding (SILENT); AM004 now names the drawing
    # candidate and leaves the setup whole
    "partial_registry_noise_r32c_project": "FLAGGED",
    "partial_registry_noise_r32c_project_batch": "FLAGGED",
    "pinn_burgers_identify_t10c_project": "FLAGGED",
    "pinn_burgers_identify_t10c_project_batch": "MATCH",
    # ermongroup/ddim: file mode was SILENT (main.py, no loop of its own, skipped
    # as "not a training entry point", nothing said): Diffusion.train() gets its
    # optimizer from functions/__init__.py's get_optimizer, which did not count
    # as building one; a project function returning an optimizer does now, and
    # AM004 names the runner. Batch mode: antithetic timesteps drawn per share
    # (AM020)
    "ddim_generalized_steps_t10c_project": "FLAGGED",
    "ddim_generalized_steps_t10c_project_batch": "FLAGGED",
    # t8a, a new user's trial of six more families.
    # KaiyangZhou/pytorch-center-loss: the CenterLoss module (its own learnable
    # centers and SGD) is prepared as a model and matches. Batch mode crashed
    # before at exit (rank 1's `os.fsync(self.file.fileno())` in the
    # deep-person-reid Logger.flush on the main-process-only stand-in), flagged
    # only by an unrelated AM023: the stand-in's fileno() is a real descriptor now
    "center_loss_mnist_t8a_project": "MATCH",
    "center_loss_mnist_t8a_project_batch": "MATCH",
    # round 28a: PyTorch-GAN cyclegan.py at its defaults (--batch_size 1, shuffled):
    # the global batch of one image cannot be split; the runtime stops it and
    # names --batch-mode per-device, AM006 says why
    "cyclegan_batch_one_r28a": "LOUD",
    # round 29i: `args.local_rank` parsed from an option whose default is
    # int(os.environ.get("LOCAL_RANK", -1)), the state dict saved under
    # `if args.local_rank in (-1, 0)`: HANG before (the FSDP gather reached by
    # local rank 0 only), FLAGGED by AM028 now (`rank_local_options`)
    "ddp_ready_argparse_local_rank_fsdp": "FLAGGED",
    # round 30a: the same option's namespace handed on, `main(parse_args())`
    # then `train(args, model, ...)`, which saves under `if args.local_rank in
    # (-1, 0)`: HANG before (CollectiveTimeoutError, rank 1's broadcast at 60 s),
    # FLAGGED by AM028 now (`parsed_namespaces`)
    "ddp_ready_argparse_namespace_param_fsdp": "FLAGGED",
    # round 30f: the option parsed in main.py, its namespace handed to
    # `train(args, ...)` in trainer.py, which saves under `if args.local_rank
    # in (-1, 0)`. File mode: main.py left whole by AM004 (trainer.py's
    # backward), before and now. Batch mode: HANG before (trainer.py's save
    # migrated with no finding), FLAGGED by AM028 now (`project_namespaces`)
    "ddp_ready_argparse_namespace_project_fsdp": "FLAGGED",
    "ddp_ready_argparse_namespace_project_fsdp_batch": "FLAGGED",
    "ddp_ready_rank_env_fsdp": "FLAGGED",
    # round 30j: the option's value handed on as a plain argument,
    # `train(..., args.local_rank)`, which saves under `if rank in (-1, 0)`:
    # HANG before, FLAGGED by AM028 now (`divergence_parameters`)
    "ddp_ready_rank_param_fsdp": "FLAGGED",
    # round 31a: the option's namespace kept in a config dict, `run({"args":
    # args, ...})`, which saves under `if config["args"].local_rank in (-1,
    # 0)`; and `rank = dist.get_rank() if dist.is_initialized() else 0` handed
    # as `train(..., rank)`, which saves under `if rank == 0`: HANG before,
    # FLAGGED by AM028 now (`parsed_namespaces`, `divergence_parameters`)
    "ddp_ready_argparse_config_dict_fsdp": "FLAGGED",
    "ddp_ready_get_rank_param_fsdp": "FLAGGED",
    # fixe: the save's test asks `dist.get_rank()` itself (`if
    # dist.is_initialized() and dist.get_rank() == 0:`): HANG before (the
    # reviewer's repro), FLAGGED by AM028 now (`divergence_questions`)
    "ddp_ready_get_rank_test_fsdp_fixe": "FLAGGED",
    "ddp_ready_rank_main_output_r29": "MATCH",
    # a rank held in a variable, then seeded with (SILENT before: the losses
    # differed from step 0 at world 2); AM046 now follows the variable
    "held_rank_seed_r29k": "FLAGGED",
    "feature_cache_object_r30b": "FLAGGED",
    "mc_eval_shuffle_r30b_project": "FLAGGED",
    "mc_eval_shuffle_r30b_project_batch": "FLAGGED",
    # a save run per sample (Store.put from __getitem__) and for the training
    # loop's checkpoint: migrated with the save kept before (every process wrote
    # the checkpoint; under FSDP rank 1's empty state dict over rank 0's); the
    # file is left whole now (AM010's block)
    "shared_store_saver_r30i": "FLAGGED",
    # bhanML/Co-teaching: SILENT before (flagged only by unrelated AM009/AM017/
    # AM030/AM033): loss.loss_coteaching ranks the per-sample losses with
    # np.argsort and keeps the smallest, each process over its own share; AM007
    # now names a ranking in a helper module's loss function. Batch mode is
    # left whole (AM103: data/cifar.py's noisify prints on every process)
    "coteaching_noisy_t8a_project": "FLAGGED",
    "coteaching_noisy_t8a_project_batch": "FLAGGED",
    # kaidic/LDAM-DRW: SILENT before (AM007 took `criterion(output, target)`
    # for a mean over samples): the criterion, built in branches and handed to
    # train(), may be `nn.CrossEntropyLoss(weight=per_cls_weights)` or LDAMLoss
    # with weight=, a mean over the class weights of the targets (traced_criteria)
    "ldam_drw_longtail_t8a_project": "FLAGGED",
    "ldam_drw_longtail_t8a_project_batch": "FLAGGED",
    # salesforce/awd-lstm-lm: left whole (AM004: `model = model.RNNModel(...)`
    # rebinds the module's name; AM019: one token stream, no loader; AM028: the
    # learning rate scaled by a window length drawn with np.random)
    "awd_lstm_asgd_t8a_project": "FLAGGED",
    "awd_lstm_asgd_t8a_project_batch": "FLAGGED",
    # HobbitLong/SupContrast run as two stages: LOUD by accident before (the
    # second stage's `model = SupConResNet(...)` was wrapped and AM004 took the
    # name for prepared; the first stage, `model, criterion = set_model(opt)`,
    # trained unprepared and the runtime stopped it). Left whole now, AM004
    # naming the unpacking; AM007 names SupConLoss, handed to train()
    "supcon_two_stage_t8a_project": "FLAGGED",
    "supcon_two_stage_t8a_project_batch": "FLAGGED",
    # YU1ut/MixMatch-pytorch: np.random.beta and torch.randperm mixup over each
    # process's joint batch (AM020); WeightEMA and interleave migrate as they are
    "mixmatch_ema_interleave_t8a_project": "FLAGGED",
    "mixmatch_ema_interleave_t8a_project_batch": "FLAGGED",
    # t9b (new-user trial). ajbrock/BigGAN-PyTorch: train_fns.GAN_training_function
    # returns its step `train` as a closure (backward, G.optim/D.optim steps
    # inside). File mode was SILENT (main.py, with no loop of its own, skipped
    # as no training entry point, unnamed); AM004 now follows the returned
    # closure (closure_steps.py) and leaves the script whole, naming train_fns.py
    "biggan_ema_accum_t9b_project": "FLAGGED",
    "biggan_ema_accum_t9b_project_batch": "FLAGGED",
    # akanimax/pro_gan_pytorch: ProGAN(gen, dis).train() (gan.py) trains both
    # models it is handed; batch mode prepared only `gen` (the one its step
    # runs) and left `dis` unprepared while its optimizer was prepared: now
    # every handed model whose parameters feed an optimizer of the class is
    # prepared (handed_optimized.py). The minibatch stddev layer of the
    # Discriminator main.py builds was not named (main.py shards no loader,
    # gan.py does): AM037 now names it. The noise drawn with the depth's
    # configured batch size crashes the gradient penalty (AM020 names the draw;
    # r29a: AM025 too, reading get_data_loader's batch-size parameter)
    "progan_fade_stddev_t9b_project": "FLAGGED",
    "progan_fade_stddev_t9b_project_batch": "FLAGGED",
    # r29a: a collective under a test of the file system the run's own writes
    # may change (LOUD before: the runtime saw the ranks apart at the test
    # loader); a function of another module handed a trained and a frozen model
    "best_exists_eval_r29a": "MATCH",
    "distill_frozen_teacher_r29a_project": "FLAGGED",
    "distill_frozen_teacher_r29a_project_batch": "MATCH",
    # samet-akcay/ganomaly: the Ganomaly class of lib/model.py trains its own
    # netg/netd (file mode AM004); batch mode is left whole for Options.parse's
    # opt.txt written in a method (AM036). Its AM028 on `res["AUC"] >
    # best_auc` traces `res` to the clock through the dict's other entry (the
    # run time): the taint does not follow dict keys (not fixed)
    "ganomaly_auc_t9b_project": "FLAGGED",
    "ganomaly_auc_t9b_project_batch": "FLAGGED",
    # lucabergamini/VAEGAN-PYTORCH: the equilibrium gate (train_dis/train_dec
    # from batch means of D's BCE) decides which backward runs: AM028 names it
    # (a process that skips a backward another runs would hang under DDP)
    "vaegan_equilibrium_t9b_project": "FLAGGED",
    "vaegan_equilibrium_t9b_project_batch": "FLAGGED",
    # znxlwm/UGATIT-pytorch: the UGATIT class trains its own six models (file
    # mode AM004); batch mode migrates it whole (itertools.chain optimizers,
    # next() restarts, linear LR decay on param_groups, RhoClipper `apply`-ed
    # to the prepared generators) and matches
    "ugatit_rho_clip_t9b_project": "FLAGGED",
    "ugatit_rho_clip_t9b_project_batch": "MATCH",
    # NVIDIA/pix2pixHD: file mode was LOUD by accident (train.py's backward and
    # prints rewritten while create_model's DataParallel-wrapped
    # Pix2PixHDModel, whose optimizers train.py takes as
    # `model.module.optimizer_G`, stayed unprepared: the runtime stopped it);
    # AM004 now takes the owner of a stepped optimizer attribute, called in the
    # loop, for a trained model (owned_optimizers.py) and leaves the file
    # whole. Batch mode: TrainOptions.parse and Visualizer write in methods (AM036)
    "pix2pixhd_multiscale_t9b_project": "FLAGGED",
    "pix2pixhd_multiscale_t9b_project_batch": "FLAGGED",
    # t9a, a new user's trial of six more families.
    # hungthanhpham94/GRU4REC-pytorch: main.py hands its model to lib.Trainer,
    # which trains it (AM004 leaves main.py whole). Batch mode migrates it;
    # the session-parallel lib.DataLoader is no torch loader, so every process
    # trains on every batch (AM019) and it matches
    "gru4rec_session_parallel_t9a_project": "FLAGGED",
    "gru4rec_session_parallel_t9a_project_batch": "MATCH",
    # dreamquark-ai/tabnet: SILENT before in file mode (main.py only calls
    # clf.fit; "not a training entry point", no finding): TabNetClassifier's
    # base TabModel in abstract_model.py builds the network and
    # `self.optimizer_fn(...)` (an optimizer class handed as a default) and
    # calls backward; AM004 names it now. Batch mode: AM006 (a tuple of a
    # loader and a list of loaders from create_dataloaders), AM103
    "tabnet_ghost_bn_t9a_project": "FLAGGED",
    "tabnet_ghost_bn_t9a_project_batch": "FLAGGED",
    # gidariss/FeatureLearningRotNet: SILENT before in file mode
    # (`getattr(alg, config["algorithm_type"])(config)` picks the trainer
    # class by name; AM004 names the package's classes now). Batch mode was
    # half migrated (ClassificationModel.py's backward and dataloader.py's
    # loader migrated, algorithms/Algorithm.py, which builds the models, left
    # whole; the runtime stopped it): `from . import Algorithm` is the class
    # __init__.py re-exports now, the subclasses are left whole by AM004, and
    # dataloader.py by AM103 (its importer runs a training left whole)
    "rotnet_frozen_feats_t9a_project": "FLAGGED",
    "rotnet_frozen_feats_t9a_project_batch": "FLAGGED",
    # MuggleWang/CosFace_pytorch: matches. AM007 said MarginCosineProduct
    # compared the batch's samples (`cosine_sim(input, self.weight)`: against
    # the class weights); batch mode crashed now and then (rank 1's
    # lfw_eval torch.load of the checkpoint `model.module.save` was writing on
    # rank 0): AM017 puts that call between two barriers now
    "cosface_lfw_kfold_t9a_project": "MATCH",
    "cosface_lfw_kfold_t9a_project_batch": "MATCH",
    # DmitryUlyanov/deep-image-prior: SILENT before in both modes (the
    # closure's backward in main.py, the Adam and its steps in
    # utils/common_utils.py's optimize: neither a training file alone);
    # AM004 names optimize now, AM103 leaves common_utils.py whole with it
    "deep_image_prior_t9a_project": "FLAGGED",
    "deep_image_prior_t9a_project_batch": "FLAGGED",
    # rtqichen/torchdiffeq odenet_mnist: file mode crashed on rank 1
    # (FileNotFoundError: `makedirs(args.save)` moved to the main process with
    # no barrier before get_logger's FileHandler), flagged only by AM006; a
    # barrier follows it now, and it differs for AM006's reason (accuracy()
    # in utils.py counts over sharded loaders). Batch mode was LOUD by accident
    # (accel.reduce refused accuracy()'s numpy int64 count): matches now
    "neural_ode_nfe_t9a_project": "FLAGGED",
    "neural_ode_nfe_t9a_project_batch": "MATCH",
    # t10b, a new user's trial of NLP and speech families.
    # kimiyoung/transformer-xl pytorch/train.py: an ordered LM iterator (not a
    # DataLoader, time first) and the memory carried from segment to segment:
    # every process trains on every batch (AM019, true), and the training
    # matches. In file mode utils/exp_utils.py's logging function prints on
    # every process (AM017): its "End of training" is compared, so the repeated
    # output is seen every run (it also garbled a step line at random)
    "txl_mems_t10b_project": "FLAGGED",
    "txl_mems_t10b_project_batch": "MATCH",
    # uvipen/Hierarchical-attention-networks-pytorch: HierAttNet keeps the
    # configured batch size and model._init_hidden_state() makes the GRUs'
    # initial state with it before every batch ("Expected hidden size (2, 2,
    # 5), got [2, 4, 5]" at world 2). Flagged only by AM033 (a printed
    # accuracy) before: AM025 now reads a state-reset method of the class, not
    # only forward, through `batch_size = self.batch_size`
    "han_hidden_batch_t10b_project": "FLAGGED",
    "han_hidden_batch_t10b_project_batch": "FLAGGED",
    # coetaur0/ESIM: dict batches, `model.device` read by the helpers, masks
    # cut at the batch's longest, ReduceLROnPlateau on the validation accuracy
    # over len(dataloader.dataset). File mode leaves it whole (AM004: train()
    # and validate() of scripts/training/utils.py train the model); batch mode
    # migrates both files and matches
    "esim_snli_t10b_project": "FLAGGED",
    "esim_snli_t10b_project_batch": "MATCH",
    # srviest/char-cnn-text-classification-pytorch: metric.print_f_score prints
    # on every process (AM017) and the batch accuracy is the share's corrects
    # over args.batch_size (AM033); the F1's lists are gathered in order
    "charcnn_agnews_t10b_project": "FLAGGED",
    "charcnn_agnews_t10b_project_batch": "FLAGGED",
    # SeanNaren/deepspeech.pytorch (pre-Lightning): AudioDataLoader, a
    # DataLoader subclass of the project over a BucketingSampler, is not
    # prepared, so every process trains on every batch (AM019). The losses
    # match, a BatchNorm's running_var did not (the synchronised batch norm
    # counts the two copies of the batch): AM019's message did not say so
    # before, and names it now
    "deepspeech2_ctc_wer_t10b_project": "FLAGGED",
    "deepspeech2_ctc_wer_t10b_project_batch": "FLAGGED",
    # ULMFiT in plain PyTorch after fastai v1's recipe (layer groups from a
    # model method, param groups built in fit.py, training in fit.py): left
    # whole (AM004: the optimizer's parameters come through a helper of another
    # module)
    "ulmfit_unfreeze_t10b_project": "FLAGGED",
    "ulmfit_unfreeze_t10b_project_batch": "FLAGGED",
    # The same recipe in one script (param groups per submodule, requires_grad
    # set by hand per phase): SILENT before (DDP registers the parameters that
    # are trainable at its first forward; the unfrozen encoder's gradients were
    # never averaged); the DDP strategy now averages parameters made trainable
    # later and rebuilds its wrapper over them
    "ulmfit_inline_unfreeze_t10b": "MATCH",
    # t10a, a new user's trial of vision and self-supervised trainers.
    # PatrickHua/SimSiam's stream fork: `torch.roll(images, args.n_offset)`
    # pairs each frame with the previous one across the flattened batch; the
    # losses differed with only AM007 (reduction unknown), AM006 (the kNN
    # monitor's memory loader) and AM017 said: AM037 names the roll now.
    # Batch mode: AM036 (tools/logger.py's appends), AM103
    "simsiam_stream_roll_t10a_project": "FLAGGED",
    "simsiam_stream_roll_t10a_project_batch": "FLAGGED",
    # pytorch/examples super_resolution: SILENT before in both modes (rank 1's
    # super_resolve() torch.load of "model_epoch_{}.pth".format(nEpochs) ran
    # before rank 0 wrote "model_epoch_{}.pth".format(epoch) in checkpoint():
    # FileNotFoundError). AM010 matches the two paths by their template and
    # puts a barrier after the save now
    "espcn_superres_t10a_project": "MATCH",
    "espcn_superres_t10a_project_batch": "MATCH",
    # ProGamerGov/neural-style-pt: LOUD by accident before (the runtime
    # refused `img = nn.Parameter(img)` stepped by the prepared LBFGS, which
    # the codemod had left as "no loader feeds it"); AM031 leaves the file
    # whole now and says there is nothing to divide
    "gatys_lbfgs_image_t10a_project": "FLAGGED",
    "gatys_lbfgs_image_t10a_project_batch": "FLAGGED",
    # ChanLIM/noisystudent_pytorch (noise rates 0): matches at the first try,
    # the student rebuilt with its optimizer inside the loop included
    "noisy_student_kd_t10a_project": "MATCH",
    "noisy_student_kd_t10a_project_batch": "MATCH",
    # MIC-DKFZ/nnUNet v1: batch mode was SILENT before (nnunet_trainer.py
    # migrated, its base NetworkTrainer in network_trainer.py, whose
    # run_training prints, logs, saves and removes checkpoints, left to every
    # process: interleaved lines, racing writes). The base module of a
    # batch's trainer class is migrated for it now (AM036 then names its
    # save-then-isfile, AM103 leaves the trainer whole)
    "nnunet_lite_deepsup_t10a_project": "FLAGGED",
    "nnunet_lite_deepsup_t10a_project_batch": "FLAGGED",
    # facebookresearch/deit as a single-GPU fork keeping the repository's
    # dist-aware utils.py: the losses differed (the runtime's process group
    # makes `utils.get_world_size()` 2, doubling `linear_scaled_lr`, and
    # `args.seed + utils.get_rank()` differ by process) with only AM006/AM017
    # findings about engine.py's meters and prints: AM046 names both reads now
    "deit_distill_token_t10a_project": "FLAGGED",
    "deit_distill_token_t10a_project_batch": "FLAGGED",
    # d2l-ai/d2l-en LeNet with the book's d2l/torch.py vendored: train_ch6
    # builds the SGD over the net it is handed; AM004 names it (true cause)
    "d2l_train_ch6_t10d_project": "FLAGGED",
    "d2l_train_ch6_t10d_project_batch": "MATCH",
    # d2l's fine-tuning notebook with train_ch13 (nn.DataParallel over
    # try_all_gpus, l.sum().backward()): file mode left whole (AM004: train_ch13
    # trains the net it is handed). Batch mode migrates both files; it printed
    # `float(accel.reduce(l)) / labels.shape[0]` (the global sum over the
    # share's count, twice the loss) flagged only by AM009 on the Animator:
    # AM008 now reports a sum divided by the share's row count, unrewritten
    "d2l_train_ch13_t10d_project": "FLAGGED",
    "d2l_train_ch13_t10d_project_batch": "FLAGGED",
    # dlwpt-code p2ch11 LunaTrainingApp: per-sample metrics in
    # torch.zeros(METRICS_SIZE, len(train_dl.dataset)) filled at
    # batch_ndx * batch_size; before t10d flagged only for other reasons
    # (AM006 on enumerateWithEstimate, AM017 on the writers): AM029 names it now
    "luna_training_app_t10d_project": "FLAGGED",
    "luna_training_app_t10d_project_batch": "FLAGGED",
    # pytorch/examples mnist_forward_forward: each Layer owns its Adam (built
    # in __init__ over self.parameters()); AM004's reason names that now
    "mnist_forward_forward_t10d": "FLAGGED",
    # pytorch/examples time_sequence_prediction: full-batch LBFGS, no loader
    "time_sequence_lbfgs_t10d_project": "MATCH",
    "time_sequence_lbfgs_t10d_project_batch": "MATCH",
    # t11c, a new user's trial of federated averaging, energy-based models,
    # AlphaZero self-play, DDPG and deep ensembles. shaoxiongji/federated-learning
    # main_fed.py: LocalUpdate(args, dataset, idxs).train(net=copy.deepcopy(
    # net_glob)) builds its SGD and trains the copy in models/Update.py; left
    # whole in both modes (AM004, AM103)
    "fedavg_clients_t11c_project": "FLAGGED",
    "fedavg_clients_t11c_project_batch": "FLAGGED",
    # wgrathwohl/JEM train_wrn_ebm.py: `f, replay_buffer =
    # get_model_and_buffer(...)` cannot be wrapped (AM004). Through the CLI the
    # reason named `with open(...) as f` (params.txt, the same name a few lines
    # up: the scope's bindings are a set); it names the model's binding now
    "jem_sgld_buffer_t11c_project": "FLAGGED",
    "jem_sgld_buffer_t11c_project_batch": "FLAGGED",
    # suragnair/alpha-zero-general: NNetWrapper trains its own self.nnet with an
    # Adam built in train() (file mode AM004); batch mode: Coach.learn saves
    # temp.pth.tar and loads it back in methods (AM036, AM103)
    "alphazero_selfplay_t11c_project": "FLAGGED",
    "alphazero_selfplay_t11c_project_batch": "FLAGGED",
    # ghliu/pytorch-ddpg: DDPG(object) trains actor and critic in ddpg.py (file
    # mode AM004); batch mode: Evaluator.__call__/save_results write in methods
    # (AM036, AM103)
    "ddpg_ou_sequential_t11c_project": "FLAGGED",
    "ddpg_ou_sequential_t11c_project_batch": "FLAGGED",
    # omegafragger/DDU train_ensemble.py: the members come from a list
    # comprehension of a registry's builder (AM004: cannot wrap item by item).
    # Batch mode also claimed that no optimizer of main.py receives the member's
    # parameters, which was false (the optimizer is recorded on the list the
    # loop variable steps through); only the true reason is given now
    "ddu_deep_ensemble_t11c_project": "FLAGGED",
    "ddu_deep_ensemble_t11c_project_batch": "FLAGGED",
    # rosinality/igebm-pytorch train.py: SampleBuffer.get draws with
    # random.choices (AM020, true). Left whole by AM028 on `i == n_iter` until
    # r31b, a false premise: `loader = tqdm(enumerate(sample_data(loader)))`
    # rebinds the loader's name to an enumerate over a generator that cycles
    # it, so `i` is the step counter (ModuleIndex._enumerated now says so).
    # Migrated since: the losses differ from step 8, as AM020 says (its draws);
    # each process's replay buffer also holds its own share's negatives only
    # (`buffer 4` vs `buffer 8` in the eval line), which AM032 names since
    # r32c (`SampleBuffer.push`, replay_buffers)
    "igebm_langevin_buffer_t11c_project": "FLAGGED",
    "igebm_langevin_buffer_t11c_project_batch": "FLAGGED",
    # t11b, a new user's trial of vision methods and reference trainers.
    # pytorch/vision references/segmentation as the repository ships it (its
    # own init_distributed_mode / DistributedSampler / DDP branches): already
    # distributed, left unchanged (AM100)
    "tv_segmentation_t11b_project": "MATCH",
    "tv_segmentation_t11b_project_batch": "MATCH",
    # The same as a single-GPU fork (distributed branches cut from train.py,
    # utils.py vendored whole): the test loader's batch of 1 cannot be split
    # (AM006 says so; the runtime stops it). Its training losses differed,
    # unreported: transforms.py's own RandomHorizontalFlip/RandomCrop draw
    # with the random module in __call__, built in main.py and handed to the
    # dataset; AM020 now reports a local class whose __call__ draws where it
    # is built in a file that builds a loader
    "tv_segmentation_fork_t11b_project": "LOUD",
    "tv_segmentation_fork_t11b_project_batch": "LOUD",
    # davda54/sam: SILENT before in both modes ("not a training entry point":
    # SAM(torch.optim.Optimizer) in sam.py is stepped by first_step /
    # second_step, never step(); batch mode migrated only the Cifar loaders
    # and the Log). An imported Optimizer subclass makes a training file now
    # (HelperFact.optimizer_subclass) and AM004/AM005 prepare it; the
    # training matches in batch mode but for BatchNorm's running_var
    # (AM019: the Cifar class's loaders are not prepared, every process runs
    # the whole batch); file mode: log.py prints on every process (AM017)
    "sam_bypass_bn_t11b_project": "FLAGGED",
    "sam_bypass_bn_t11b_project_batch": "FLAGGED",
    # jfzhang95/pytorch-video-recognition: VideoDataset's np.random temporal
    # and spatial crop offsets in __getitem__ (AM020); matches with them fixed
    "c3d_clip_offsets_t11b_project": "FLAGGED",
    "c3d_clip_offsets_t11b_project_batch": "FLAGGED",
    # ronghuaiyang/arcface-pytorch: random crop/flip in Dataset.__getitem__
    # (AM020) and nn.Dropout() in the backbone; and its FocalLoss (AM007)
    "arcface_margin_fc_t11b_project": "FLAGGED",
    "arcface_margin_fc_t11b_project_batch": "FLAGGED",
    # the same without the crop/flip and the dropout: what t11b saw still
    # differ (loss step 7 rel 0.13; it starts at step 1, rel ~1e-5) is
    # FocalLoss, the focal term of the batch's mean cross-entropy, applied
    # by each process to its share's mean. SILENT before r30h (only AM017/
    # AM033 said, neither the cause); AM007 names it now (cause AM007)
    "arcface_noaug_t11b_project": "FLAGGED",
    "arcface_noaug_t11b_project_batch": "FLAGGED",
    # PyTorch's QAT tutorial split into model/data/utils: file mode left
    # whole (AM004: train_one_epoch in utils.py). Batch mode ran the QAT
    # model under the runtime's wrapper (losses differ from step 3, each
    # process's observers see its share) and crashed on rank 1 in
    # print_size_of_model's os.path.getsize("temp.p"), flagged only by AM009:
    # AM004 now leaves a file calling torch.ao.quantization.prepare_qat (and
    # the other module swaps) whole with that reason
    "qat_observers_t11b_project": "FLAGGED",
    "qat_observers_t11b_project_batch": "FLAGGED",
    # t11a, a new user's trial of NLP, seq2seq and LLM fine-tuning projects.
    # harvardnlp/annotated-transformer (single-GPU train_worker): SILENT
    # before (AM005 prepared the validation epoch's DummyOptimizer, an
    # Optimizer subclass that never initialises its base: AttributeError
    # '_optimizer_step_pre_hooks'); a stand-in is left alone now. The loss,
    # a summed KL divergence over batch.ntokens computed by the
    # SimpleLossCompute handed to run_epoch, was taken for a mean over
    # samples with no finding: AM007 reports a loss of a handed callable as of
    # unknown reduction, and the validation sums over
    # `(Batch(...) for b in valid_dataloader)` are AM009's now
    "annotated_transformer_t11a_project": "FLAGGED",
    "annotated_transformer_t11a_project_batch": "FLAGGED",
    # eric-mitchell/direct-preference-optimization BasicTrainer: file mode left
    # whole (AM004: trainers.py trains the policy). Batch mode was left whole
    # by AM103 with an untrue reason (utils.py, migrated for
    # get_local_run_dir's makedirs, "handed sharded loaders"); a helper
    # migrated for its writes alone that comes back unchanged no longer keeps
    # its importer whole: migrated, it matches (the batch generator is not a
    # DataLoader: every process trains on every batch)
    "dpo_reference_t11a_project": "FLAGGED",
    "dpo_reference_t11a_project_batch": "MATCH",
    # cccntu/minLoRA over a nanoGPT-style GPT: `GPT.from_pretrained(config)`
    # was no model to AM004 (left unwrapped while its loaders were sharded);
    # a class method of a model class that hands back `cls(...)` builds a
    # model now. LoRA parametrizations registered after prepare_model are
    # averaged; the validation mean over the sharded loader differs (AM009,
    # AM033)
    "minlora_gpt_t11a_project": "FLAGGED",
    "minlora_gpt_t11a_project_batch": "FLAGGED",
    # PyTorch seq2seq tutorial, batched version: get_dataloader() returns
    # (input_lang, output_lang, pairs, loader): left whole (AM006, true)
    "seq2seq_attn_batched_t11a_project": "FLAGGED",
    "seq2seq_attn_batched_t11a_project_batch": "FLAGGED",
    # PyTorch text classification tutorial (torchtext): matches at the first
    # try, the scheduler step decided by the validation accuracy included
    "text_sentiment_ngrams_t11a_project": "MATCH",
    "text_sentiment_ngrams_t11a_project_batch": "MATCH",
    # t12b, a new user's trial of audio, speech and generative projects.
    # jik876/hifi-gan as a single-GPU fork: its validation loader of batch size
    # 1 was stopped by the runtime at world 2 (LOUD), AM006 speaking of
    # shuffling and gradients; its `shuffle=False, sampler=None` is a fixed
    # order, so it is left whole now (every process validates all of it), and
    # the training differs by MelDataset's random.randint segments (AM020)
    "hifigan_mpd_msd_t12b_project": "FLAGGED",
    "hifigan_mpd_msd_t12b_project_batch": "FLAGGED",
    # the PyTorch speech-command tutorial (M5): matches (the convolutions
    # before BatchNorm1d drop their bias, whose rounding Adam amplifies)
    "speech_commands_m5_t12b": "MATCH",
    # lucidrains/electra-pytorch pretrain.py: `iter(cycle(DataLoader(...)))`
    # read with next(): the printed accuracies of the batch were the share's
    # with no finding (the generator was not seen through); AM008 names them
    # now, AM020 the draws of Electra.forward, AM007 the token means
    "electra_replaced_token_t12b_project": "FLAGGED",
    "electra_replaced_token_t12b_project_batch": "FLAGGED",
    # dome272/VQGAN-pytorch: the adaptive weight from torch.autograd.grad on
    # the decoder's last layer is each process's share's (AM007 named
    # calculate_lambda, not why); since r32c AM040 follows the call into
    # VQGAN.calculate_lambda (HelperFact.parameter_grads) and leaves main.py
    # whole, naming it
    "vqgan_adaptive_lambda_t12b_project": "FLAGGED",
    "vqgan_adaptive_lambda_t12b_project_batch": "FLAGGED",
    # cloneofsimo/minRF with an EMA copy: left whole before by AM039, whose
    # reason was false (LabelEmbedder.token_drop, a method of tensors only,
    # taken for a submodule run on a condition of the batch); migrated now,
    # FLAGGED by AM020 (RF.forward's per-sample times) and AM009 (loss bins)
    "rectified_flow_ema_t12b_project": "FLAGGED",
    "rectified_flow_ema_t12b_project_batch": "FLAGGED",
    # t12c, a new user's trial of image classification and robust/denoising
    # trainers and a forecaster. yaodongyu/TRADES: trades_loss in trades.py runs
    # the attack's backward (the l_2 branch's SGD over `delta`) on the handed
    # model; left whole in both modes (AM004; batch: AM031 on delta, AM103)
    "trades_kl_eval_attack_t12c_project": "FLAGGED",
    "trades_kl_eval_attack_t12c_project_batch": "FLAGGED",
    # SaoYan/DnCNN-PyTorch fork (torch.randn noise, MultiStepLR): the residual
    # loss `sum / (imgn_train.size()[0] * 2)` was of unknown reduction (AM007,
    # "cannot tell apart as this process's count"); it is a mean now. The
    # per-step PSNR_train of the main process's share differs (AM033, true)
    "dncnn_randn_noise_t12c_project": "FLAGGED",
    "dncnn_randn_noise_t12c_project_batch": "FLAGGED",
    # omihub777/ViT-CIFAR with Lightning replaced by a hand-written Trainer
    # whose fit(model, loaders) runs the backward in trainer.py: file mode
    # migrated main.py (model, optimizer, loaders) and left that backward plain,
    # caught only by the runtime (LOUD UnsyncedGradientsError by accident); AM004
    # leaves main.py whole now, naming Trainer.fit. Batch: training_step called
    # on the prepared model bypasses DDP's forward (AM042, true)
    "vit_cifar_trainer_warmup_t12c_project": "FLAGGED",
    "vit_cifar_trainer_warmup_t12c_project_batch": "FLAGGED",
    # mattsherar/Temporal_Fusion_Transform: AM039 left main.py whole on
    # `if apply_masking:` in TFT.apply_embedding, "a condition on its batch",
    # false (every self.apply_embedding call passes True/False); the true
    # reason is left: early stopping on the sharded validation mean (AM028)
    "tft_quantile_early_stop_t12c_project": "FLAGGED",
    "tft_quantile_early_stop_t12c_project_batch": "FLAGGED",
    # facebookresearch/ConvNeXt main.py single-GPU fork: seed + utils.get_rank(),
    # steps per epoch over utils.get_world_size() (AM046), timm-style Mixup draws
    # (AM020). Batch mode crashed in the runtime on accel.global_loss(None)
    # (class_acc is None under Mixup); None passes through now
    "convnext_finetune_llrd_ema_t12c_project": "FLAGGED",
    "convnext_finetune_llrd_ema_t12c_project_batch": "FLAGGED",
    # t12a, a new user's trial of detection projects.
    # facebookresearch/detr as a single-GPU fork (util/misc.py vendored whole):
    # `model, criterion, postprocessors = build_model(args)` cannot be wrapped
    # where it is bound; AM004 named the alias `model_without_ddp = model` as
    # the unwrappable form, and tells the tuple unpacking's story now
    "detr_set_criterion_t12a_project": "FLAGGED",
    "detr_set_criterion_t12a_project_batch": "FLAGGED",
    # pytorch/vision references/detection as a single-GPU fork: the detector
    # samples its training anchors with torch.randperm in a held
    # BalancedPositiveNegativeSampler. File mode differed with AM006/AM017/
    # AM046 and AM037 (a false one: `.max(0)` over an IoU matrix, gone since
    # r32d: a record's matrix, `for t in targets`), none the
    # draws' (AM020 did not follow `self.fg_bg_sampler(...)`, nor a model
    # handed to engine.train_one_epoch); batch mode was left whole by AM004 (the
    # optimizer got `params = [p for p in model.parameters() ...]`, which the
    # batch's callers did not follow), and migrated it misses the draws too
    # (the step iterates metric_logger.log_every(data_loader, ...)). AM020
    # names them in both modes now
    "tv_detection_fork_t12a_project": "FLAGGED",
    "tv_detection_fork_t12a_project_batch": "FLAGGED",
    # xingyizhou/CenterNet: main.py is left whole (AM004: the model is rebound
    # by `model, optimizer, start_epoch = load_model(...)`); batch mode
    # migrated trains/base_trainer.py, reached through train_factory.py and
    # ctdet.py, under the unmigrated main.py (half a migration: doubled eval
    # lines); AM103 pairs them through modules that train nothing now
    "centernet_focal_t12a_project": "FLAGGED",
    "centernet_focal_t12a_project_batch": "FLAGGED",
    # amdegroot/ssd.pytorch: MultiBoxLoss divides its sums by N, the batch's
    # number of positives (AM007: reduction not known); loc_loss/conf_loss
    # sums of .item() (AM009, AM033). The np.random mirror of
    # SSDAugmentation (through Compose's list of transforms) is not named
    "ssd_multibox_t12a_project": "FLAGGED",
    "ssd_multibox_t12a_project_batch": "FLAGGED",
    # r33a: the same with Compose/RandomMirror/SSDAugmentation defined in the
    # migrated file and handed to data/'s dataset: no AM020 named the mirror
    # before (only the other-module form was); `data_pipeline._handed_transforms`
    "ssd_local_augment_r33a_project": "FLAGGED",
    "ssd_local_augment_r33a_project_batch": "FLAGGED",
    # fixc (rev7): a learned weight's value printed under `if args.local_rank ==
    # 0:` looked like output only; under FSDP the read of the sharded parameter
    # is a collective. AM047 rewrote the test and the run hung (60 s timeout);
    # the read keeps the branch possibly collective (`model_reads`): AM028 now
    "ddp_ready_param_value_print_fsdp_fixc": "FLAGGED",
    # t13b, a new user's trial of sequence and language projects.
    # lkulowski/LSTM_encoder_decoder: the model's own train_model() builds its
    # Adam over self.parameters() and slices batches by hand; example.py has no
    # loop, loader or optimizer, and file mode skipped it as "not a training
    # entry point" with no finding (SILENT); batch mode migrated the model's
    # file under an unprepared model (LOUD by accident). The script goes to the
    # full pass now, where AM042 names `model.train_model(...)` (AM103 in batch)
    "lstm_encdec_tf_t13b_project": "FLAGGED",
    "lstm_encdec_tf_t13b_project_batch": "FLAGGED",
    # LadaOndris/BERT-transformer: BucketSampler (random.shuffle) as
    # batch_sampler=, a collate_batch method padding with a padding mask, a
    # SingleGPULossCompute object that runs backward and steps a Noam wrapper
    "transformer_cls_bucket_t13b_project": "MATCH",
    "transformer_cls_bucket_t13b_project_batch": "MATCH",
    # AssemblyAI's speech-recognition tutorial: collate_fn=lambda x:
    # data_processing(x, 'train') of utils.py, whose module-level
    # nn.Sequential(MelSpectrogram, FrequencyMasking, TimeMasking) draws with
    # torch.rand; AM020 named neither the lambda's imported function nor the
    # module-level object, and does now; the runtime refuses the padded
    # collation that draws (ShardingError)
    "speech_ctc_specaug_t13b_project": "LOUD",
    "speech_ctc_specaug_t13b_project_batch": "LOUD",
    # abhimishra91/transformers-tutorials T5 summarisation (model stand-in):
    # lm_labels padded with -100 inside the model's loss (AM007: reduction not
    # known), gradient accumulation, predictions gathered for ROUGE-1
    "t5_summarize_loop_t13b_project": "FLAGGED",
    "t5_summarize_loop_t13b_project_batch": "FLAGGED",
    # PyTorch nn.Transformer language-model tutorial: batchify/get_batch (AM019,
    # every process trains on all the data, the same steps), best weights in a
    # `with TemporaryDirectory() as tempdir:` folder; the save moved to the main
    # process and the other process could not reload (FileNotFoundError,
    # FLAGGED for AM019 only): AM010 leaves a save into such a folder now
    "transformer_lm_tempdir_t13b": "MATCH",
    # t13c: new-user trial on unseen public projects (issue 12). LightGCN's
    # batch run was LOUD by accident (the runtime's "received gradients but was
    # never called": `loss, reg_loss = self.model.bpr_loss(...)` then `loss =
    # loss + reg_loss` hid the layer-running method from AM042); improved
    # DDPM's batch run was LOUD by accident (UnpreparedParametersError: the
    # model handed to TrainLoop, whose AdamW is over `self.model_params`, was
    # not known to be trained, and it is unpacked from a local function's
    # tuple). Both are FLAGGED with the true cause now (AM042, AM004)
    "lightgcn_bpr_t13c_project": "FLAGGED",
    "lightgcn_bpr_t13c_project_batch": "FLAGGED",
    "dgcnn_modelnet_t13c_project": "FLAGGED",
    "dgcnn_modelnet_t13c_project_batch": "FLAGGED",
    "improved_ddpm_t13c_project": "FLAGGED",
    "improved_ddpm_t13c_project_batch": "FLAGGED",
    "realesrgan_queue_t13c_project": "FLAGGED",
    "realesrgan_queue_t13c_project_batch": "FLAGGED",
    # t13a (new-user trial, self-supervised and metric learning): leftthomas/SimCLR
    # (torch.eye(2 * batch_size) of the global batch size, AM025)
    "simclr_weighted_knn_t13a_project": "FLAGGED",
    "simclr_weighted_knn_t13a_project_batch": "FLAGGED",
    # the MoCo CIFAR demo: SplitBatchNorm's own forward is refused by the runtime
    # (UnsyncedBatchNormError); the queue of model.py (AM032) and the batch
    # shuffle's randperm (AM020) are named too
    "moco_splitbn_knn_t13a_project": "LOUD",
    "moco_splitbn_knn_t13a_project_batch": "LOUD",
    # a single-GPU fork of DINO's main_dino.py: the crops drawn in the dataset's
    # transform (AM020) and the centre updated from the share (AM032, AM037)
    "dino_multicrop_t13a_project": "FLAGGED",
    "dino_multicrop_t13a_project_batch": "FLAGGED",
    # dichotomies/proxy-nca: recall@k over the sharded eval loader in utils.py
    # (AM006 in file mode, AM009 on predict_batchwise's collection in batch mode)
    "proxynca_recall_t13a_project": "FLAGGED",
    "proxynca_recall_t13a_project_batch": "FLAGGED",
    # t14b (new-user trial, Kaggle-style and applied trainers): CheXNet's
    # whole-validation AUROC from `gt = torch.cat((gt, labels), 0)` over
    # `dataloaders[phase]` (a dict filled item by item) decides the best
    # checkpoint and the early stop (AM028; the whole-model reload is AM004)
    "chexnet_auroc_t14b_project": "FLAGGED",
    "chexnet_auroc_t14b_project_batch": "FLAGGED",
    "chexnet_state_dict_t14b_project": "FLAGGED",
    "chexnet_state_dict_t14b_project_batch": "FLAGGED",
    # DeepHash-pytorch DSH: the loss compares the batch with a memory of every
    # training sample's code, filled at the loader's dataset indices (AM007)
    "dsh_hashing_map_t14b_project": "FLAGGED",
    "dsh_hashing_map_t14b_project_batch": "FLAGGED",
    # a Kaggle tabular k-fold trainer: its Engine trains in engine.py (AM004 in
    # file mode); in batch mode `Table.to_csv` writes from a method no barrier
    # can follow (AM036, AM103)
    "tabular_kfold_oof_t14b_project": "FLAGGED",
    "tabular_kfold_oof_t14b_project_batch": "FLAGGED",
    # the Cassava baseline + TTA notebooks: random flips of the project's own
    # transform classes built by get_train_transforms() (AM020); the validation
    # accuracy and the TTA predictions collected with `xs += [p.numpy()]` are
    # gathered in order (AM029)
    "cassava_fold_tta_t14b_project": "FLAGGED",
    "cassava_fold_tta_t14b_project_batch": "FLAGGED",
    # t14c: corenel/pytorch-adda. Batch mode was FLAGGED for a cause no finding
    # named (46 steps, original 28): its training is left whole (AM004) while
    # datasets/mnist.py and usps.py, reached only through utils.get_data_loader,
    # had their loaders sharded; they are now left whole too (AM103)
    "adda_pretrain_critic_t14c_project": "FLAGGED",
    "adda_pretrain_critic_t14c_project_batch": "MATCH",
    # mil-tokyo/MCD_DA: file mode leaves the Solver of solver.py alone (AM004);
    # batch mode: `if img_s.size()[0] < self.batch_size: break` on a batch of
    # PairedData (a dict of two sharded loaders' batches) ends every epoch at
    # once; AM006 at PairedData's next() says the batches are this process's
    # share, but nothing names the comparison (AM028 does in a plain loop)
    "mcd_two_classifiers_t14c_project": "FLAGGED",
    "mcd_two_classifiers_t14c_project_batch": "FLAGGED",
    # kekmodel/MPL-pytorch single-GPU fork: the teacher's MPL loss is scaled by
    # the student's loss change on this process's share (AM032 on
    # moving_dot_product, which the loss reads)
    "mpl_teacher_dot_product_t14c_project": "FLAGGED",
    "mpl_teacher_dot_product_t14c_project_batch": "FLAGGED",
    # pcyin/pytorch_nmt: its own data_iter generator is not sharded (every
    # process trains on every batch), beam search through model.translate and
    # corpus BLEU on every process over the whole dev set: equal
    "nmt_beam_bleu_t14c_project": "MATCH",
    "nmt_beam_bleu_t14c_project_batch": "MATCH",
    # Cyanogenoid/pytorch-vqa: the validation's answers, accuracies and indices
    # lists (saved with the weights) hold this process's share (AM029), and so
    # does the accuracy printed over them (AM033); the training matches
    "vqa_soft_accuracy_t14c_project": "FLAGGED",
    "vqa_soft_accuracy_t14c_project_batch": "FLAGGED",
    # t14a (new-user trial, continual, active and curriculum learning):
    # facebookresearch/GradientEpisodicMemory: main.py imports the model by a
    # computed name (importlib.import_module('model.' + args.model)) whose Net
    # owns its optimizer and steps in observe() (SILENT in file mode before:
    # skipped as "not a training entry point" with no finding; AM004 names it
    # now); batch mode migrates model/gem.py without a model to prepare
    # (AM004 there) and the runtime refuses the unprepared parameters
    "gem_episodic_memory_t14a_project": "FLAGGED",
    "gem_episodic_memory_t14a_project_batch": "FLAGGED",
    # ej0cl6/deep-active-learning: utils.get_net returns nets.Net, which trains
    # (SILENT in file mode before: skipped with no finding; AM004 names the
    # factory now); batch mode: the MC-dropout pool probabilities
    # probs[i][idxs] += ... filled from the sharded pool loader (unseen before,
    # AM009 now) and predict's preds[idxs] (AM009)
    "bald_active_learning_t14a_project": "FLAGGED",
    "bald_active_learning_t14a_project_batch": "FLAGGED",
    # joansj/hat's LwF: Appr in approaches/lwf.py trains (AM004 in file mode);
    # batch mode: tensors sliced without a loader, every process trains on all
    # of it (AM019), so the runs agree
    "lwf_multihead_t14a_project": "FLAGGED",
    "lwf_multihead_t14a_project_batch": "MATCH",
    # THUMNLab/CurML self-paced: the trainer takes its loader and its model
    # from the curriculum's hooks (data_curriculum, model_curriculum) every
    # epoch; left whole in both modes (AM004, AM006 on the hooks' loaders)
    "self_paced_curml_t14a_project": "FLAGGED",
    "self_paced_curml_t14a_project_batch": "FLAGGED",
    # lrzpellegrini/icarl-pytorch: file mode prints the share's loss (AM033),
    # sums it (AM009) and cl_strategies/icarl.py prints on every process
    # (AM017); batch mode migrates utils.py's training function and matches
    "icarl_herding_t14a_project": "FLAGGED",
    "icarl_herding_t14a_project_batch": "MATCH",
    # t15d (new-user trial, hand-written NLP loops):
    # pytorch-pretrained-BERT run_classifier.py: the training (gradient
    # accumulation, hand-written warmup_linear) matches; the dev logits grown
    # with `preds[0] = np.append(preds[0], ...)` hold this process's share
    # (AM029), and compute_metrics' `assert len(preds) == len(labels)` stops
    # the run; batch mode: BertConfig.to_json_file writes a file read back
    # right after, from a method no barrier can follow (AM036, AM103)
    "bert_glue_warmup_t15d_project": "FLAGGED",
    "bert_glue_warmup_t15d_project_batch": "FLAGGED",
    # pytorch-pretrained-BERT run_squad.py: one RawResult per feature appended
    # in a loop over the batch's example indices, inside the loop over batches
    # (AM029: not gathered), so write_predictions' unique_id_to_result lookup
    # failed with a KeyError for the other process's features; since r36a the
    # per-row appends are gathered in order and the predictions and exact/F1
    # equal the original's; the final parameters differ only in
    # attention.out_proj.bias, whose gradient is 0 but for float noise (the
    # softmax over positions ignores a shift common to all of them), which
    # AdamW scales up
    "bert_squad_nbest_t15d_project": "FLAGGED",
    "bert_squad_nbest_t15d_project_batch": "FLAGGED",
    # daandouwe/glove: main.py only calls train.main(args), which builds the
    # model and SparseAdam and trains on numpy-sampled batches (SILENT in file
    # mode before: skipped as "not a training entry point" with no finding;
    # AM004 names the call now, HelperFact.runs_training); batch mode migrates
    # train.py, every process draws the same batch, and the runs agree
    "glove_cooccur_t15d_project": "FLAGGED",
    "glove_cooccur_t15d_project_batch": "MATCH",
    # AnubhavGupta3377/Text-Classification-Models-Pytorch fastText: the model
    # keeps its optimizer and trains itself in run_epoch with
    # `self.__call__(x)` (file mode was FLAGGED by an unrelated AM017: the
    # model and optimizer prepared, every process trained the whole set, 32
    # steps printed for 18; batch mode LOUD by the runtime's never-called
    # check); AM042 names run_epoch in both modes now
    "fasttext_run_epoch_t15d_project": "FLAGGED",
    "fasttext_run_epoch_t15d_project_batch": "FLAGGED",
    # ymfa/seq2seq-summarizer: batches from the dataset's own endless
    # generator (not sharded: every process trains on every batch), the loss
    # computed in forward with random teacher forcing drawn alike on every
    # process, Adagrad, ROUGE-L over decoded validation batches: equal
    "seq2seq_summarizer_rouge_t15d_project": "MATCH",
    "seq2seq_summarizer_rouge_t15d_project_batch": "MATCH",
    # t15b (3-D, stereo, tracking): JiaRenChang/PSMNet, the masked smooth-L1
    # (AM007) and python random crops (AM020); its 3-px error `1 - correct /
    # n` summed over the test set was reduced as a count, now reported (AM009)
    "psmnet_stereo_t15b_project": "FLAGGED",
    "psmnet_stereo_t15b_project_batch": "FLAGGED",
    # huanglianghua/siamfc-pytorch: TrackerSiamFC trains in siamfc/ (AM004 in
    # file mode); batch mode: Pair's np.random pairs (AM020) and BalancedLoss,
    # which was migrated as reduction="sum" (now unknown, AM007)
    "siamfc_pairs_t15b_project": "FLAGGED",
    "siamfc_pairs_t15b_project_batch": "FLAGGED",
    # BalancedLoss on fixed pairs: SILENT before (backward(reduction="sum")
    # doubled the gradient at world 2), MATCH with the AM007 report now
    "siamfc_balanced_loss_t15b": "MATCH",
    # yanx27 train_partseg.py: left whole (AM028: start_epoch from a checkpoint
    # under a datetime-named folder; AM020 np.random.choice in __getitem__)
    "pointnet2_partseg_t15b_project": "FLAGGED",
    "pointnet2_partseg_t15b_project_batch": "FLAGGED",
    # lee-zq/3DUNet-Pytorch: left whole (AM028 on the best/early-stop val loss,
    # AM007 WeightDiceLoss, AM020 random crops, AM006 the batch-1 test loader)
    "unet3d_lits_t15b_project": "FLAGGED",
    "unet3d_lits_t15b_project_batch": "FLAGGED",
    # Time0o/colorful-colorization: Model trains in the package (AM004 in file
    # mode); batch mode: the colour prior is a NumPy sum over the sharded
    # training loader (AM009), the batch left whole (AM103)
    "colorization_rebalance_t15b_project": "FLAGGED",
    "colorization_rebalance_t15b_project_batch": "FLAGGED",
    # the same with the prior counted in torch: reduced (AM009), MATCH
    "colorization_torch_prior_t15b_project": "MATCH",
    # t15a (new-user trial, scientific and dense regression): the FNO's
    # `LpLoss(size_average=False)` of utilities3.py, a plain class whose
    # `__call__` sums over the batch, was taken for a mean (train_l2 halved,
    # no finding on it); its reduction is read now, and a setting of the
    # instance choosing it is read off the construction (r36a: MATCH); with
    # `out.view(batch_size, -1)` the cause is the batch size used as a shape
    # (AM025)
    "fno_lploss_batch_dim_t15a_project": "MATCH",
    "fno_lploss_batch_dim_t15a_project_batch": "MATCH",
    "fno_lploss_normalizer_t15a_project": "FLAGGED",
    "fno_lploss_normalizer_t15a_project_batch": "FLAGGED",
    # pytorch_geometric's qm9_nn_conv: ReduceLROnPlateau and the best-model
    # test on the validation MAE of this process's share (AM028)
    "qm9_mpnn_plateau_t15a_project": "FLAGGED",
    "qm9_mpnn_plateau_t15a_project_batch": "FLAGGED",
    # CSRNet-pytorch: `args.batch_size = 1` set in main(), the runtime refuses
    # a batch smaller than the world (BatchSmallerThanWorldError)
    "csrnet_density_mae_t15a_project": "LOUD",
    "csrnet_density_mae_t15a_project_batch": "LOUD",
    # ConvLSTM-PyTorch: moving digits drawn in __getitem__ (AM020). Before the
    # round's fixes it crashed (accel.global_loss of the float `loss_aver`),
    # then hung (EarlyStopping made main-process-only while the loop reads
    # `early_stopping.early_stop`; AM017 leaves it now, needs-review)
    "convlstm_moving_digits_t15a_project": "FLAGGED",
    "convlstm_moving_digits_t15a_project_batch": "FLAGGED",
    # a DeepONet whose model class trains itself in `train(...)` (AM042)
    "deeponet_self_train_t15a_project": "FLAGGED",
    "deeponet_self_train_t15a_project_batch": "FLAGGED",
    # t15c, offline RL / imitation / exploration: CORL's single-file IQL on a
    # fixed dataset of transitions (ReplayBuffer of tensors sampled with
    # np.random.randint, every process draws the same batch) matches
    "corl_iql_dataset_t15c": "MATCH",
    # CS285 hw1 BC + DAgger: MLPPolicySL.update runs self.forward and the
    # backward inside the policy class (AM042) in both modes
    "cs285_bc_dagger_t15c_project": "FLAGGED",
    "cs285_bc_dagger_t15c_project_batch": "FLAGGED",
    # kzl/decision-transformer: SequenceTrainer (seq_trainer.py) trains in the
    # loop of its base Trainer in trainer.py (AM004 in both modes)
    "decision_transformer_t15c_project": "FLAGGED",
    "decision_transformer_t15c_project_batch": "FLAGGED",
    # jcwleo's ICM + PPO: ICMAgent trains in agents.py (AM004 in file mode);
    # batch mode was FLAGGED by an untrue AM028 (the workers' `s, r, d, rd, lr =
    # work.step(action)` read as an optimizer step); the environment step is no
    # training step now (environment_steps.py) and the batch matches, each
    # process training on the whole rollout (AM019)
    "icm_ppo_curiosity_t15c_project": "FLAGGED",
    "icm_ppo_curiosity_t15c_project_batch": "MATCH",
    # Kaixhin/Rainbow: Agent.learn in agent.py trains (AM004 in file mode);
    # batch mode migrates agent.py and matches (prioritised replay sampled
    # alike on every process)
    "rainbow_per_t15c_project": "FLAGGED",
    "rainbow_per_t15c_project_batch": "MATCH",
    # vlukiyanov/pt-dec: DEC trains in ptdec/model.py (AM004 in file mode); in
    # batch mode the label-delta stopping test over predict()'s sharded loader
    # would differ between processes (AM028)
    "dec_kmeans_target_t16b_project": "FLAGGED",
    "dec_kmeans_target_t16b_project_batch": "FLAGGED",
    # rtqichen/beta-tcvae: `obj.mean().mul(-1).backward()` of `vae.elbo(x, n)`,
    # a method running the layers past the prepared call; was LOUD ("received
    # gradients but was never called") in both modes: AM042 did not follow
    # `.mul(-1)`; it does now (method_steps._SCALINGS)
    "btcvae_mss_t16b_project": "FLAGGED",
    "btcvae_mss_t16b_project_batch": "FLAGGED",
    # YannDubs/disentangling-vae's routing: the btcvae loss in the model's
    # forward (`log_density(zs.view(B, 1, D), mu.view(1, B, D), ...)`, a
    # logsumexp over dim 1); was SILENT (only AM034/AM007/AM008 fixed, no
    # finding naming the pairs); AM037 now reads rows broadcast against rows
    # of the batch in a stepped forward (batch_pairs.py)
    "btcvae_forward_pairwise_fixt": "FLAGGED",
    # ikostrikov/pytorch-flows: `loss = -model.log_probs(data).mean()`, a
    # FlowSequential method running self(inputs); AM042 now follows the
    # negation (before: migrated)
    "maf_batchnormflow_t16b_project": "FLAGGED",
    "maf_batchnormflow_t16b_project_batch": "FLAGGED",
    # HobbitLong/RepDistiller CRD: trainable_list / module_list / criterion_list
    # are nn.ModuleList([]) filled by .append; AM004 wrapped the three containers
    # (no forward: LOUD by accident at the first step, UnsyncedGradientsError in
    # file mode, "received gradients but was never called" in batch mode); a
    # trained ModuleList/ModuleDict now blocks the file (model_parts.
    # forwardless_builds), with AM020 for the negatives np.random.choice draws
    "crd_repdistiller_t16a_project": "FLAGGED",
    "crd_repdistiller_t16a_project_batch": "FLAGGED",
    # chxy95/Deep-Mutual-Learning: file mode leaves main.py (the Trainer of
    # trainer.py trains, AM004). Batch mode: main.py hands Trainer a tuple of
    # prepared loaders when training (else the test loader alone), followed
    # into `self.train_loader = data_loader[0]` (caller kind "loader or
    # loaders"; AM019 said, untrue, that it was not prepared); losses match,
    # the per-peer train losses/accuracies and val accuracies are combined
    # (AM009), and the val losses, which AM009 cannot tell sums from batch
    # means, stay the process's share: eval line rel 2.3e-02, needs-review AM009
    "dml_peer_students_t16a_project": "FLAGGED",
    "dml_peer_students_t16a_project_batch": "FLAGGED",
    # AberHu/Knowledge-Distillation-Zoo train_at.py: the student reaches train()
    # through a dict (`nets = {'snet': snet, ...}`, `snet = nets['snet']`); AM004
    # leaves the file, saying (true now) that `snet` is taken out of a
    # container it does not follow to the model put in it (it said its
    # parameters reached no optimizer of this file, untrue: SGD(snet.
    # parameters()) in main); the dict is not followed (open, issue 12);
    # nothing is migrated, so nothing is wrong
    "kdzoo_attention_transfer_t16a_project": "FLAGGED",
    "kdzoo_attention_transfer_t16a_project_batch": "FLAGGED",
    # t17b: hand-written detection/segmentation loops and NeRF trainers (issue 12)
    # wkentaro/pytorch-fcn: file mode leaves main.py (Trainer of trainer.py
    # trains, AM004); batch mode: losses match, validate()'s label_trues /
    # label_preds lists hold the process's share (AM029, the cause of the mean
    # IU line's difference), per-image train metrics of the share (AM033)
    "fcn_trainer_t17b_project": "FLAGGED",
    "fcn_trainer_t17b_project_batch": "FLAGGED",
    # usuyama/pytorch-unet: calc_loss(pred, target, metrics) adds into the dict
    # the loop made; epoch_samples alone was reduced, so the printed means were
    # half the original's with findings about dice_loss only (AM007/AM008);
    # AM009 now reports the handed dict and leaves both terms of each ratio
    # (metrics[k] / epoch_samples, iou_sum / epoch_samples) the process's own
    "unet_calc_loss_metrics_t17b_project": "FLAGGED",
    "unet_calc_loss_metrics_t17b_project_batch": "FLAGGED",
    # krrish94/nerf-pytorch: no loader, np.random.choice image and rays per
    # iteration, lr set by global step: every process trains on the same rays
    "nerf_random_rays_cfg_t17b_project": "MATCH",
    "nerf_random_rays_cfg_t17b_project_batch": "MATCH",
    # ashawkey/torch-ngp: file mode leaves main.py (Trainer of nerf/utils.py,
    # AM004); batch mode migrates the Trainer, whose train_step runs
    # self.model.render(...), never the model's forward: the runtime stops it
    # at the first step ("received gradients but was never called", true;
    # AM042 does not follow the loss back through train_step's returned tuple
    # and the criterion's arguments: open)
    "ngp_trainer_rays_t17b_project": "FLAGGED",
    "ngp_trainer_rays_t17b_project_batch": "LOUD",
    # ultralytics/yolov3 (2020): `if not torch.isfinite(loss): return` on the
    # process's share (AM028) and compute_loss's (lbox + lobj + lcls) * bs with
    # lbox a mean over matched targets (AM007): left unmigrated, both true
    "yolov3_loss_times_bs_t17b_project": "FLAGGED",
    "yolov3_loss_times_bs_t17b_project_batch": "FLAGGED",
    # LeeJunHyun/Image_Segmentation: file mode AM004 (Solver of solver.py);
    # batch mode: the best U-Net saved on JS + DC of the process's share
    # (get_DC/get_JS: ratios over the whole batch's pixels), AM028
    "unet_solver_batch_dc_t17b_project": "FLAGGED",
    "unet_solver_batch_dc_t17b_project_batch": "FLAGGED",
    # zijundeng/pytorch-semantic-segmentation: ReduceLROnPlateau stepped on the
    # validation loss of the share (CrossEntropyLoss2d's reduction chosen by
    # size_average), AM028: left unmigrated
    "fcn8s_plateau_snapshot_t17b_project": "FLAGGED",
    "fcn8s_plateau_snapshot_t17b_project_batch": "FLAGGED",
    # sgrvinod's SSD tutorial: MultiBoxLoss returns conf_loss + alpha * loc_loss
    # with conf_loss = (...).sum() / n_positives.sum().float(), a mean over the
    # batch's positive priors; its call was read as a mean over samples
    # (AM007 "fixed") and the only finding was AM037's `.max(dim=0)` over one
    # image's objects; the call is now unknown, AM007 names it
    "ssd_tutorial_iterations_t17b_project": "FLAGGED",
    "ssd_tutorial_iterations_t17b_project_batch": "FLAGGED",
    # t17a (issue 12, super-resolution and CTC speech recognition):
    # twtygqyy/pytorch-vdsr: nn.MSELoss(size_average=False) handed to train();
    # SILENT before (AM007 took it for a mean: half the gradient), MATCH with
    # traced_loss_modules
    "vdsr_step_lr_clip_t17a_project": "MATCH",
    "vdsr_step_lr_clip_t17a_project_batch": "MATCH",
    # leftthomas/SRGAN: RandomCrop offsets from the global RNG in __getitem__
    # (AM020, the cause); the running Loss_G ratio is reported by AM009
    "srgan_vgg_tv_t17a_project": "FLAGGED",
    "srgan_vgg_tv_t17a_project_batch": "FLAGGED",
    # Lornatang/SRGAN-PyTorch train_srresnet.py: CPUPrefetcher while loop;
    # file mode: ProgressMeter.display_summary prints on every process
    # (AM017); batch mode: AM103 leaves the setup whole (dataset.py's
    # prefetcher receives the sharded loaders)
    "srresnet_prefetcher_iqa_t17a_project": "FLAGGED",
    "srresnet_prefetcher_iqa_t17a_project_batch": "FLAGGED",
    # tugstugi/mongolian-speech-recognition: train(epoch, phase) over
    # `train_loader if phase == 'train' else valid_loader`; FLAGGED for an
    # untrue reason before (the CER/WER sums stayed the share, no finding named
    # them), MATCH now that the loop is a loader loop (AM009 reduces them)
    "mbspeech_ctc_phase_t17a_project": "MATCH",
    "mbspeech_ctc_phase_t17a_project_batch": "MATCH",
    # przybyszewskiw/DeepSpeech2: no DataLoader; file mode: Runner trains in
    # runner.py (AM004); batch mode: every process trains on every batch
    "deepspeech2_runner_sortagrad_t17a_project": "FLAGGED",
    "deepspeech2_runner_sortagrad_t17a_project_batch": "MATCH",
    # r36a (codemod leftovers of the trials): zip(loader, hard) with `hard` grown
    # under a test of this process's share: the loop's count differs between
    # processes; AM028 leaves the file whole (before: migrated, AM009 only)
    "zip_loader_hard_weights_r36a": "FLAGGED",
    # t17c (new-user trial, forecasting / recommender / knowledge tracing):
    # nnzhan/Graph-WaveNet: engine.py's trainer builds and trains its model
    # (AM004 in file mode); in batch mode main.py hands it every batch of
    # util.py's own loader class (dataloader["train_loader"].get_iterator()),
    # not split: was SILENT (the synchronised BatchNorm's running_var counted
    # each process's copy of the batch), AM019 names it now (_trainer_step)
    "gwnet_trainer_scaler_t17c_project": "FLAGGED",
    "gwnet_trainer_scaler_t17c_project_batch": "FLAGGED",
    # yihong-chen/neural-collaborative-filtering: Engine.__init__ builds the
    # optimizer over self.model, which the subclass NeuMFEngine of neumf.py
    # sets before super().__init__ (AM004 in both modes; AM006 for the
    # per-epoch loader a SampleGenerator method returns)
    "ncf_engine_subclass_t17c_project": "FLAGGED",
    "ncf_engine_subclass_t17c_project_batch": "FLAGGED",
    # theophilegervet/learner-performance-prediction train_sakt.py: padded
    # batches of a local prepare_batches (random.shuffle, same seed on every
    # process): each process trains on every batch, the run matches
    "sakt_prepare_batches_t17c_project": "MATCH",
    "sakt_prepare_batches_t17c_project_batch": "MATCH",
    # yuqinie98/PatchTST: Exp_Basic builds the model in its constructor (AM004,
    # as Informer2020's), OneCycleLR per batch copied by adjust_learning_rate
    "patchtst_onecycle_revin_t17c_project": "FLAGGED",
    "patchtst_onecycle_revin_t17c_project_batch": "FLAGGED",
    # LSTM stock tutorials: MinMaxScaler(-1, 1), full-batch training (AM019)
    "lstm_stock_minmax_t17c": "MATCH",
    # SungjoonPark/dkt-public: SimulatedTrainer runs the backward, its base in
    # trainer/base.py builds the optimizer, the model class comes on args
    # (AM004 in both modes)
    "dkt_trainer_args_model_t17c_project": "FLAGGED",
    "dkt_trainer_args_model_t17c_project_batch": "FLAGGED",
    # one-file DKT: BCE-with-logits over pred[mask], a mean over answered
    # steps whose number differs between shares (AM007), and the test AUC of
    # a process's share picking the best checkpoint (AM028): left whole
    "dkt_masked_select_tokens_t17c": "FLAGGED",
    # fx37a (lists whose length differs between processes): a container grown
    # where only some processes go (a constant appended under a test of this
    # process's batch) has a length that differs; before fx37a the first three
    # were migrated with no finding of it (measured at world 2 on main: SILENT
    # gloo timeout, HANG, SILENT gloo timeout), AM028 leaves them whole now.
    # The early stopping one is MATCH: its validation sum is reduced (AM009),
    # so the test and the list are the same on every process.
    "zip_loader_hard_flags_fx37a": "FLAGGED",
    "hard_count_len_break_fx37a": "FLAGGED",
    "replay_range_len_fx37a": "FLAGGED",
    "early_stop_bad_epochs_list_fx37a": "MATCH",
    # fx37b (issue 12): a torch.nn loss module whose mean is over a count that
    # differs between shares, built in main() and handed in (SILENT on main:
    # taken for a mean over samples); now the count, read off the module
    "seq2seq_handed_pad_fx37b": "MATCH",
    "trainer_class_weights_fx37b": "MATCH",
    # the session's own review (rev17): zip(loader, weights) in a function whose
    # weights parameter is handed a list grown under a test of this process's
    # share: HANG on f9d5603, AM028 leaves the file whole now (handed_zips)
    "zip_handed_weights_fn_rev17": "FLAGGED",
    # hc19 (a criterion handed in from another file of the batch)
    "engine_summed_criterion_hc19_project": "FLAGGED",
    "engine_summed_criterion_hc19_project_batch": "MATCH",
    "trainer_summed_criterion_attr_hc19_project": "FLAGGED",
    "trainer_summed_criterion_attr_hc19_project_batch": "FLAGGED",
    "vae_loss_function_handed_hc19_project": "FLAGGED",
    "vae_loss_function_handed_hc19_project_batch": "FLAGGED",
    "criterion_factory_sum_hc19_project": "MATCH",
    "criterion_factory_sum_hc19_project_batch": "MATCH",
    # t18c (new-user trial, anomaly detection / adversarial robustness /
    # compression / char-RNN / word2vec):
    # theeluwin/pytorch-sgns: negatives drawn with torch.multinomial in
    # SGNS.forward and the context window with random.sample in __getitem__:
    # each process draws for its share (AM020)
    "sgns_item2vec_t18c_project": "FLAGGED",
    "sgns_item2vec_t18c_project_batch": "FLAGGED",
    # ylsung/pytorch-adversarial-training: the attack's random start (AM020),
    # the test accuracy of a share (AM009/AM033), and the clean and
    # adversarial images of the batch saved every n steps from the loop over a
    # Trainer.train parameter that an uncalled wrapper also hands on (AM044
    # reports it now; it was silent)
    "fgsm_untargeted_trainer_t18c_project": "FLAGGED",
    "fgsm_untargeted_trainer_t18c_project_batch": "FLAGGED",
    # the same without the random start: only the saved images differ; SILENT
    # on main (1b9800f), AM044 names it now
    "fgsm_clean_start_t18c_project": "FLAGGED",
    # anthonygal/lyric_generation_with_RNNs lstm/ (Udacity char-RNN): train()
    # of lstm_train.py builds its optimizer (AM004 in file mode); batch mode
    # trains every process on every numpy window (AM019), the run matches
    "char_lstm_get_batches_t18c_project": "FLAGGED",
    "char_lstm_get_batches_t18c_project_batch": "MATCH",
    # autoencoder anomaly detection: the validation errors gathered in order
    # before np.percentile, the test counts reduced
    "ae_percentile_threshold_t18c": "MATCH",
    # LTH runner: prune.identity masks, global_unstructured between rounds,
    # rewinding to the init params
    "lth_prune_rewind_t18c": "MATCH",
    # t18b: meta-learning and metric learning (issue 12): MAML, prototypical
    # and relation networks, ArcFace heads, FaceNet triplets, each in both modes
    "maml_meta_learner_t18b_project": "FLAGGED",
    "maml_meta_learner_t18b_project_batch": "FLAGGED",
    "protonet_categories_sampler_t18b_project": "FLAGGED",
    "protonet_categories_sampler_t18b_project_batch": "FLAGGED",
    "face_evolve_arcface_head_t18b_project": "FLAGGED",
    "face_evolve_arcface_head_t18b_project_batch": "FLAGGED",
    "relation_net_episodes_t18b_project": "FLAGGED",
    "relation_net_episodes_t18b_project_batch": "FLAGGED",
    "facenet_triplet_hard_t18b_project": "FLAGGED",
    "facenet_triplet_hard_t18b_project_batch": "FLAGGED",
    # t18d (new-user trial, tutorial and course repositories): the official
    # spatial transformer tutorial (visualize_stn's next(iter(test_loader)) of
    # a sharded loader: AM006), the char-RNN name classifier (one random
    # example a step, manual SGD: matches), yunjey/pytorch-tutorial's GAN
    # (images.reshape(batch_size, -1) and torch.ones(batch_size, 1): AM025),
    # ResNet (update_lr) and language model (no loader: AM019), the PyTorch
    # quickstart
    "stn_affine_grid_t18d": "FLAGGED",
    "char_rnn_classify_t18d": "MATCH",
    "yunjey_gan_reset_grad_t18d": "FLAGGED",
    "yunjey_resnet_update_lr_t18d": "MATCH",
    "quickstart_train_test_t18d": "MATCH",
    "yunjey_lm_detach_t18d_project": "MATCH",
    "yunjey_lm_detach_t18d_project_batch": "MATCH",
    # the Udacity sentiment-rnn notebook: h = net.init_hidden(batch_size) of
    # model.py's SentimentRNN (weight.new(n_layers, batch_size, hidden)), the
    # loaders from data_prep.make_loaders' tuple: was SILENT (the LSTM's
    # hidden-size error at world 2, nothing named it), AM025 names it now
    "udacity_sentiment_rnn_t18d_project": "FLAGGED",
    "udacity_sentiment_rnn_t18d_project_batch": "FLAGGED",
    # t18a (new-user trial: flows, fast neural style, show-attend-tell captioning):
    # sgrvinod's captioning stops early on BLEU-4 of each process's share of the
    # validation set: AM028 leaves it whole (true)
    "show_attend_tell_bleu_t18a_project": "FLAGGED",
    "show_attend_tell_bleu_t18a_project_batch": "FLAGGED",
    # rrmina's style Grams of style_tensor.expand([BATCH_SIZE, ...]) handed to the
    # VGG and compared whole with each share's Grams: a size error at world 2,
    # FLAGGED by AM009/AM017 only before; AM025 names it now (batch_size_derived)
    "fast_style_expand_gram_t18a_project": "FLAGGED",
    "fast_style_expand_gram_t18a_project_batch": "FLAGGED",
    # gordicaleksa's style image repeated to the batch size inside
    # utils.prepare_img(..., batch_size=training_config["batch_size"]): the same
    # size error; its findings (AM007/AM008/AM009/AM033) do not name it (left)
    "johnson_style_config_t18a_project": "FLAGGED",
    "johnson_style_config_t18a_project_batch": "FLAGGED",
    # chaiyujin's Glow: model and optimizer built in builder.py and handed as
    # Trainer(**built): AM004 leaves it whole (true)
    "glow_trainer_builder_t18a_project": "FLAGGED",
    "glow_trainer_builder_t18a_project_batch": "FLAGGED",
    # fx38b (issue 12, rev17 items 6-8): a loss class with no call of its own
    # reads as its base's with the settings its __init__ hands it, a copied
    # criterion as what it copies (a later __dict__ write: needs-review), and a
    # loader method bound once (train_iter = ....get_iterator) as the method
    # (AM019). All seven SILENT on main 1b9800f6, measured at world 2.
    "fno_lp_subclass_fx38b_project": "MATCH",
    "fno_lp_subclass_fx38b_project_batch": "MATCH",
    "fno_lp_subclass_module_fx38b_project": "MATCH",
    "fno_lp_subclass_module_fx38b_project_batch": "MATCH",
    "fno_lp_copy_dict_fx38b_project": "FLAGGED",
    "fno_lp_copy_dict_fx38b_project_batch": "FLAGGED",
    "gwnet_loader_alias_fx38b_project": "FLAGGED",
    # fx39a: fast.ai course-v3's exp/ modules chained by star imports (only
    # nb_03 imports torch): was SILENT in both modes (main.py skipped as "not
    # a training entry point"; in a batch nb_03's loaders sharded with no model
    # prepared). nb_04's Runner.fit(epochs, learn) steps self.opt, a property
    # of the learner it stores, which no trainer fact follows
    # (HelperFact.unfollowed_training): AM004 leaves main.py whole naming it,
    # and in a batch nb_03 follows (AM103)
    "fastai_runner_callbacks_t18d_project": "FLAGGED",
    "fastai_runner_callbacks_t18d_project_batch": "FLAGGED",
    # t18e (new-user trial, Kaggle competition solutions and kernels):
    # haqishen's SIIM-ISIC 1st-place train.py: TTA logits summed into
    # torch.zeros((data.shape[0], k)) were reduced across processes as row
    # counts (AM009) and the val loss's .numpy() handed to accel.global_loss:
    # both modes crashed, FLAGGED by an AM011 finding that was not the cause;
    # gathered (AM029) and combined below the .numpy() now. AM011 still says
    # the best-AUC state_dict is reached by only some processes: the AUC is
    # over PROBS that AM029 gathers after AM011 ran (see the docs' note)
    "melanoma_warmup_tta_t18e_project": "MATCH",
    "melanoma_warmup_tta_t18e_project_batch": "MATCH",
    # Y. Nakama's PPPM notebook as a package: main.py only calls
    # src.train.train_loop per fold, whose backward is in train_fn of its
    # module: file mode was skipped as not a training entry point (SILENT),
    # AM004 names the call now; batch mode: valid_fn's loss meter (AM009)
    "pppm_cosine_warmup_t18e_project": "FLAGGED",
    "pppm_cosine_warmup_t18e_project_batch": "FLAGGED",
    # MoA kernel: seeds x folds, OneCycleLR per batch, weight_norm layers
    "moa_seeds_onecycle_t18e": "MATCH",
    # Quora insincere kernel: predictions written by batch position (AM009)
    "quora_threshold_f1_t18e": "FLAGGED",
    # ChristofHenkel's BirdCLEF 2nd-place train.py: cfg.model / cfg.dataset
    # imported by importlib, outputs collected per key in a defaultdict (AM009)
    "birdclef_importlib_cfg_t18e_project": "FLAGGED",
    "birdclef_importlib_cfg_t18e_project_batch": "FLAGGED",
    # fx38a (issue 12, what fx37a left): a container shrunk (queue.pop(),
    # rehearsal.pop(0)) or a tensor written in place (stop.fill_(1.0), a
    # buffer's phase.fill_(1)) where only some processes go; measured at world
    # 2 on 1b9800f6: SILENT gloo timeout, HANG, SILENT 32 steps vs 8, SILENT 48
    # vs 44; AM028 leaves them whole now. A for over a draw of a fixed size
    # makes as many turns everywhere: the snapshots one was MATCH with a false
    # AM011 ("only some processes go"), now MATCH with none; the task rounds
    # one was FLAGGED (AM028 on the loop), now migrated, MATCH.
    "queue_pop_while_fx38a": "FLAGGED",
    "rehearsal_drained_fx38a": "FLAGGED",
    "flag_fill_break_fx38a": "FLAGGED",
    "curriculum_phase_tensor_fx38a": "FLAGGED",
    "sampled_snapshots_fx38a": "MATCH",
    "task_restarts_randperm_fx38a": "MATCH",
    # rev19a (a review's reproductions of the session's own changes)
    "prefetcher_val_plateau_rev19a_project": "MATCH",
    "prefetcher_val_plateau_rev19a_project_batch": "FLAGGED",
    "trainer_criterion_reset_rev19a_project": "FLAGGED",
    "trainer_criterion_reset_rev19a_project_batch": "MATCH",
    "finetuner_subclass_criterion_rev19a_project": "FLAGGED",
    "finetuner_subclass_criterion_rev19a_project_batch": "MATCH",
}


#: Cases that are SILENT or HANG today: the cause (the xfail's reason). Issue
#: numbers are those of the project's tracker.
UNSOUND_TODAY: dict[str, str] = {}


def _selected(session: pytest.Session) -> set[str]:
    """The cases whose test_case was selected (``-k``); all when none was."""
    # (other test modules have a "case" parameter too: only this one's are Cases)
    names = {
        item.callspec.params["case"].name
        for item in session.items
        if isinstance(item, pytest.Function)
        and hasattr(item, "callspec")
        and isinstance(item.callspec.params.get("case"), Case)
    }
    return names or {c.name for c in CASES}


@pytest.fixture(scope="module")
def outcomes(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, Outcome]:
    root = tmp_path_factory.mktemp("soundness")
    selected = _selected(request.session)
    runnable = [
        c
        for c in CASES
        if not c.missing() and c.name in selected and (not c.extended or whole_corpus())
    ]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        jobs = {c.name: pool.submit(classify, c, root) for c in runnable}
        return {name: job.result() for name, job in jobs.items()}


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 25, f"{len(CASES)} cases"
    assert len({c.name for c in CASES}) == len(CASES)


def test_table(outcomes: dict[str, Outcome], capsys: pytest.CaptureFixture) -> None:
    """Prints the table; with ACCEL_MIGRATE_SOUNDNESS_DOC=1 writes it to the docs."""
    ordered = [outcomes[c.name] for c in CASES if c.name in outcomes]
    table = render_table(ordered)
    with capsys.disabled():
        print("\n" + table)
    if os.environ.get("ACCEL_MIGRATE_SOUNDNESS_DOC") == "1":
        assert len(ordered) == len(CASES), "the published table needs every case"
        _write_doc(table)
    assert ordered, "no case ran"


def _write_doc(table: str, doc: Path = DOC) -> None:
    text = doc.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    doc.write_text(f"{head}{START}\n{table}{END}{tail}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(
    case: Case, outcomes: dict[str, Outcome], request: pytest.FixtureRequest
) -> None:
    missing = case.missing()
    if missing:
        pytest.skip(f"{case.name} imports {', '.join(missing)}, not installed")
    if case.extended and not whole_corpus():
        pytest.skip(
            f"extended case ({case.extended}): runs with ACCEL_MIGRATE_SOUNDNESS_ALL=1"
        )
    if case.name in UNSOUND_TODAY:
        request.applymarker(
            pytest.mark.xfail(strict=True, reason=UNSOUND_TODAY[case.name])
        )
    outcome = outcomes[case.name]
    assert outcome.klass != BROKEN, outcome.detail
    assert outcome.klass not in ("SILENT", "HANG"), f"{outcome.klass}: {outcome.detail}"
    assert (
        case.name in EXPECTED
    ), f"new case: add {case.name!r}: {outcome.klass!r} to EXPECTED"
    assert outcome.klass == EXPECTED[case.name], (
        f"was {EXPECTED[case.name]}, now {outcome.klass} ({outcome.detail}): "
        "update EXPECTED and the table in docs/soundness.md"
    )


def test_expected_tables_name_real_cases() -> None:
    names = {c.name for c in CASES}
    assert set(EXPECTED) <= names
    assert set(UNSOUND_TODAY) <= names
    assert not set(EXPECTED) & set(UNSOUND_TODAY)
    assert set(EXPECTED.values()) <= {"MATCH", "FLAGGED", "LOUD"}


def test_batch_directive_makes_one_case_per_mode(tmp_path: Path) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    script = folder / "main.py"
    script.write_text("# soundness: shape a project\n# soundness: batch both\n")
    cases = parse_case("proj", script)
    assert [(c.name, c.mode) for c in cases] == [
        ("proj", "file"),
        ("proj_batch", "batch"),
    ]
    script.write_text("# soundness: shape a project\n# soundness: batch\n")
    assert [(c.name, c.mode) for c in parse_case("proj", script)] == [("proj", "batch")]
    single = tmp_path / "single.py"
    single.write_text("# soundness: shape one file\n# soundness: batch\n")
    with pytest.raises(ValueError, match="needs a project folder"):
        parse_case("single", single)
